"""Exact discrete Gaussian for large integer σ by rejection from a fixed staircase.

The compiled samplers of ``--sampler exact`` draw Z ~ N_ℤ(0, s²), P(Z = z) ∝ ρ(z) =
exp(−z²/(2s²)), for integer lattice σ = s (mechanisms/noise.py).  Canonne, Kamath & Steinke
2020 (Alg. 3) reach this law by rejection from a discrete Laplace through chains of exact
Bernoulli(e^{−γ}) factories: about fourteen Bernoullis, 0.14 µs a sample, 20× a float normal.
This module reaches the *same law* with two uniforms a sample on the fast path, for every
s ≥ :data:`S_MIN` (noise.py keeps CKS20 below).

**The envelope** (in units of s, fixed once for all s).  Split m ≥ 0 into bins of L = ⌈s/32⌉
integers, bin j = [jL, (j+1)L), j < J = 384 (up to 12 s).  Bin j's integers have m/s ≥ j/32, so
ρ(m) ≤ e^{−j²/2048} ≤ h_j/C with the integers h_j = ⌈C·e^{−j²/2048}⌉ (rounded up in rigorous
decimal arithmetic).  Beyond 12 s a tail of sub-bins g = 0, 1, … of 32L integers each carries
the envelope h_T·2^{−g}/C, h_T = ⌈C·e^{−72}⌉: there m/s ≥ 12 + g, and
e^{−(12+g)²/2} ≤ e^{−72}·2^{−g}.  The pieces' envelope masses are h_j·L/C and 64·h_T·L/C.

**One attempt.**
1. One 53-bit uniform gives the piece, the sign and U's first 10 bits: its top 9 bits pick a
   slot of an integer alias table (Walker, Vose: 512 slots of capacity 2^33) and the next 33
   bits its cut, so piece i comes with probability w_i/2^42 exactly (w_i = h_j for the bins,
   64·h_T for the tail, and a padding piece that always rejects, so Σw = 2^42).
2. m uniform in the piece (a bin: [jL, (j+1)L); the tail: sub-bin g ~ Geometric(1/2) from fair
   bits, then [(J + 32g)L, (J + 32g + 32)L)), by Lemire's multiply-and-reject on a second
   53-bit uniform (the 106-bit product is formed exactly from a float estimate within ±1 and a
   wrapped int64 correction; tested against Python integers).
3. Accept with probability p = C·2^g·ρ(m)/h (≤ 1 by the envelope), i.e. iff U < p, U ~ U[0, 1)
   read lazily:
   * bins: U's 10 head bits decide when (head + 1)/2^10 ≤ A_j/2^63, and else, with 53 more
     bits (a 63-bit prefix u), when u + 1 ≤ A_j, A_j = ⌊2^63·C·e^{−x_j²/2}/h_j⌋,
     x_j = (j + 1)(1/32 + 1/S_MIN) ≥ m/s for every m of bin j (L/s ≤ 1/32 + 1/s): about
     97 % of attempts end at the head, with no transcendental function;
   * otherwise a float screen: t = 2^63·p from libm's exp; accept if u + 1 ≤ t(1 − 2^{−40}),
     reject if u ≥ t(1 + 2^{−40}).  t's relative error is at most q·3.01·2^{−53} from
     q = (m/s)²/2 (q < 512 is screened, so < 2^{−42.6}) plus libm's exp (glibc documents
     < 1 ulp = 2^{−52}) plus five roundings: under 2^{−42}, a quarter of the margin (which
     would still hold for a libm wrong by 3000 ulp);
   * otherwise (probability about 2^{−39} per screen, and q ≥ 512) :func:`decide_exactly`:
     more 53-bit words of U are drawn and compared with rigorous decimal bounds on p at rising
     precision until the comparison is decided — exact, and it ends with probability 1.
4. An accepted m = 0 is kept with probability 1/2 (one fair bit), else the attempt restarts;
   Z = ±m with the sign bit of step 1.

Why the law is exact: P(attempt returns m) = (w_i/2^42)·(1/L)·p = C·ρ(m)/(2^42·L) in a bin
and (64h_T/2^42)·2^{−(g+1)}·(1/(32L))·C·2^g·ρ(m)/h_T = C·ρ(m)/(2^42·L) in the tail — ∝ ρ(m);
the sign bit and U are independent of the piece bits; halving m = 0 and a fair sign give
P(Z = z) ∝ ρ(z) on ℤ.  Acceptance ≈ 97 %; 2.03 uniforms an attempt.

Cost (benchmarks/bench_exact_gaussian.py, CPU time): an exact TS-Gaussian run of 10^6 rounds
× 5 arms takes 2.1× the float run's time (CKS20: 21×).

The sampler's decisions are functions of integers and public numbers (s, tables); the output
set is ℤ whatever the rewards (no float sample is ever formed).
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
from numba import objmode
from numba.core.extending import overload
from numba.np.random.generator_core import next_uint64 as _next_uint64

from dpledger._jit import njit

S_MIN = 1 << 12              # smallest s this sampler takes (noise.py uses CKS20 below)
S_MAX = 1 << 50              # largest s (the lattice sampler's documented range)
BINS_PER_SIGMA = 32
N_BINS = 384                 # bins up to 12 σ; the tail takes the rest
SLOT_BITS = 9                # 512 alias slots …
CUT_BITS = 33                # … of capacity 2^33; with the sign and 10 bits of U: 53 bits
TOTAL_BITS = SLOT_BITS + CUT_BITS
U_HEAD_BITS = 10             # U's first bits, from the piece's uniform
U_BITS = U_HEAD_BITS + 53    # U's prefix once extended by one more uniform
MARGIN = 2.0 ** -40          # float screen's relative margin (see the module docstring)
SCREEN_Q_MAX = 512.0         # q = (m/s)²/2 above this goes straight to the exact decision


# -- rigorous bounds (Python, decimal) -----------------------------------------------------------

def exp_neg_bounds(num: int, den: int, digits: int) -> tuple[Fraction, Fraction]:
    """Rationals lo ≤ e^{−num/den} ≤ hi (num ≥ 0, den > 0) from ``digits``-digit decimal
    arithmetic: num/den rounded down and up, ``Decimal.exp`` (documented correctly rounded),
    then one more unit in the last place outward."""
    return exp_neg_bound(num, den, digits, False), exp_neg_bound(num, den, digits, True)


def exp_neg_bound(num: int, den: int, digits: int, upper: bool) -> Fraction:
    """One side of :func:`exp_neg_bounds` (``upper``: hi, else lo), computed alone: the tables
    read one side per entry, and the decimal exponentials are most of the import of this
    module (every `dpledger run` imports it; issue 31)."""
    if num == 0:
        return Fraction(1)
    with localcontext() as ctx:
        ctx.prec = digits
        ctx.rounding = "ROUND_FLOOR" if upper else "ROUND_CEILING"
        x = Decimal(num) / Decimal(den)
        ctx.rounding = "ROUND_HALF_EVEN"
        e = (-x).exp()
        e = e.next_plus() if upper else e.next_minus()
    return Fraction(e)


def decide_exactly(m: int, s: int, g: int, h: int, c: int, words: np.ndarray, n_words: int) -> int:
    """Is U < p = c·2^g·e^{−m²/(2s²)}/h?  U's binary expansion starts with ``words[0]``
    (U_BITS = 63 bits) then ``words[1:n_words]`` (53 bits each).  Returns 1 (yes), −1 (no) or
    0 (these bits cannot decide: draw another word).  Precision rises until p's bracket is
    narrower than an eighth of U's, so each call ends."""
    n = U_BITS + 53 * (n_words - 1)
    u = int(words[0])
    for i in range(1, n_words):
        u = (u << 53) | int(words[i])
    u_lo, u_hi = Fraction(u, 1 << n), Fraction(u + 1, 1 << n)
    scale = Fraction(c << g, h)
    digits = 40
    while True:
        e_lo, e_hi = exp_neg_bounds(m * m, 2 * s * s, digits)
        p_lo, p_hi = scale * e_lo, scale * e_hi
        if u_hi <= p_lo:
            return 1
        if u_lo >= p_hi:
            return -1
        if (p_hi - p_lo) * 8 < u_hi - u_lo:
            return 0
        digits *= 2


# -- the tables ----------------------------------------------------------------------------------

def staircase_tables(n_bins: int = N_BINS):
    """(C, heights h_0…h_{n−1} and h_T, alias cuts, alias indices, fast-accept A_j, 2^63·C/h
    as floats) for bins up to n_bins/32 σ (see the module docstring); everything that decides
    a draw is an integer.  The tail's halving envelope needs its start x₀ = n_bins/32 ≥ ln 2
    (the Gaussian's log-slope there exceeds ln 2 per σ); the tests use n_bins = 32, where a
    third of the draws come from the tail."""
    if not (23 <= n_bins <= (1 << SLOT_BITS) - 2):
        raise ValueError("n_bins must be in [23, 510]")
    digits = 60
    x0 = n_bins * n_bins                 # e^{-x0/2048}: the envelope height where the tail starts
    approx = (sum(math.exp(-j * j / 2048.0) for j in range(n_bins))
              + 64 * math.exp(-x0 / 2048.0))
    c = int((2.0 ** TOTAL_BITS - 2.0 ** 25) / approx)
    while True:
        h = [c] + [math.ceil(c * exp_neg_bound(j * j, 2048, digits, True))
                   for j in range(1, n_bins)]
        h_tail = math.ceil(c * exp_neg_bound(x0, 2048, digits, True))
        total = sum(h) + 64 * h_tail
        if total <= 1 << TOTAL_BITS:
            break
        c -= 1 << 10
    weights = h + [64 * h_tail, (1 << TOTAL_BITS) - total]  # bins, tail, padding (reject)
    n_slots, cap = 1 << SLOT_BITS, 1 << CUT_BITS
    weights += [0] * (n_slots - len(weights))
    cut = [0] * n_slots
    alias = list(range(n_slots))
    w = list(weights)
    small = [i for i in range(n_slots) if w[i] < cap]
    large = [i for i in range(n_slots) if w[i] >= cap]
    while small and large:
        a, b = small.pop(), large.pop()
        cut[a], alias[a] = w[a], b
        w[b] -= cap - w[a]
        (small if w[b] < cap else large).append(b)
    for i in small + large:                                  # exact integers: these hold cap
        assert w[i] == cap
        cut[i], alias[i] = cap, i
    # fast accept: u + 1 ≤ A_j  ⇒  U < e^{−x_j²/2}·C/h_j ≤ p, x_j = (j+1)(1/32 + 1/S_MIN),
    # u a U_BITS-bit prefix of U
    fast = []
    for j in range(n_bins):
        x = Fraction(j + 1) * (Fraction(1, BINS_PER_SIGMA) + Fraction(1, S_MIN))
        lo = exp_neg_bound(x.numerator ** 2, 2 * x.denominator ** 2, digits, False)
        fast.append(math.floor(lo * c * (1 << U_BITS) / h[j]))
    ratio = [float(Fraction(c << U_BITS, hj)) for hj in h + [h_tail]]   # 2^63·C/h, float
    return (c, np.array(h + [h_tail], np.int64), np.array(cut, np.int64),
            np.array(alias, np.int64), np.array(fast, np.int64), np.array(ratio))


C_SCALE, HEIGHTS, ALIAS_CUT, ALIAS_INDEX, FAST_ACCEPT, RATIO = staircase_tables()


# -- the sampler ---------------------------------------------------------------------------------

# -- uniform bits ---------------------------------------------------------------------------------
# The samplers take the Generator's *bit generator* (``rng.bit_generator``), not the Generator:
# numba reference-counts a Generator (it holds a meminfo) at every inlined call that receives
# it — an atomic increment and decrement per draw, 44 % of an exact TS-Gaussian run when
# profiled — while a bit generator is a plain struct.  The bits are the same: numpy's
# ``random()`` is (next 64-bit output >> 11)·2^−53, so a kernel mixing ``rng.random()`` and
# these draws reads one stream, and the Python forms (kernels run as Python by the per-draw
# tests) consume it identically through ``random_raw()``.

def u53(bg):
    """A uniform integer on [0, 2^53): the top 53 bits of the bit generator's next 64-bit
    output (exactly the k of numpy's ``random()`` = k·2^−53)."""
    return np.int64(bg.random_raw() >> 11)


@overload(u53, inline="always")
def _u53_compiled(bg):
    def impl(bg):
        return np.int64(_next_uint64(bg) >> np.uint64(11))
    return impl


def fair_bit(bg):
    """A fair bit: ``random() < 1/2``, i.e. k < 2^52."""
    return u53(bg) < (np.int64(1) << 52)


@overload(fair_bit, inline="always")
def _fair_bit_compiled(bg):
    def impl(bg):
        return u53(bg) < (np.int64(1) << 52)
    return impl


def _below(bg, n):
    """Uniform on [0, n), 1 ≤ n < 2^53, from 53-bit uniforms k (Lemire 2019, multiply and
    reject): k·n = q·2^53 + r; q is kept unless r < 2^53 mod n.  This Python form works in
    Python integers; the compiled form below draws the same uniforms and returns the same q."""
    one = 1 << 53
    n = int(n)
    while True:
        k = int(u53(bg))
        q, r = divmod(k * n, one)
        if r >= n or r >= one % n:
            return np.int64(q)


@overload(_below, inline="always")
def _below_compiled(bg, n):
    """k·n is split as q·2^53 + r with q from a float estimate (within ±1: k·n/2^53 < n <
    2^53 is formed with relative error 2^−53) corrected exactly in wrapping int64
    arithmetic (the true r lies in (−2^53, 2^54))."""
    def impl(bg, n):
        one = np.int64(1) << 53
        while True:
            k = u53(bg)
            q = np.int64(float(k) * float(n) * 1.1102230246251565e-16)
            r = k * n - (q << 53)
            if r < 0:
                q -= 1
                r += one
            elif r >= one:
                q += 1
                r -= one
            if r >= n or r >= one % n:        # the bias-free test; one % n only when r < n
                return q
    return impl


@njit(cache=True)
def _decide(bg, m, s, g, h, c, u63):
    """The exact decision of U < c·2^g·ρ(m)/h given U's first U_BITS = 63 bits (rare: leaves
    nopython mode for :func:`decide_exactly`, drawing 53-bit words until it decides)."""
    words = np.zeros(32, np.int64)
    words[0] = u63
    n_words = 1
    while True:
        with objmode(r="int64"):
            r = decide_exactly(m, s, g, h, c, words, n_words)
        if r != 0:
            return r > 0
        if n_words == words.size:
            raise RuntimeError("discrete gaussian: 1700 bits of U did not decide")
        words[n_words] = u53(bg)
        n_words += 1


@njit(cache=True)
def _accept_slow(bg, m, s, g, h, t_scale, c, u, margin):
    """Step 3's float screen and exact decision for U's 63-bit prefix u (off the fast path,
    so not inlined)."""
    x = float(m) / float(s)
    q = 0.5 * x * x
    if q < SCREEN_Q_MAX:
        t = np.exp(-q) * t_scale
        if float(u) + 1.0 <= t * (1.0 - margin):      # u + 1 can be 2^63: not in int64
            return True
        if float(u) >= t * (1.0 + margin):
            return False
    return _decide(bg, m, s, g, h, c, u)


@njit(cache=True)
def _tail_value(bg, L, n_bins):
    """Step 2 in the tail: (m, g) with g ~ Geometric(1/2) and m uniform in sub-bin g."""
    g = 0
    while fair_bit(bg):
        g += 1
    base = n_bins + BINS_PER_SIGMA * g
    if g > 40 or (base + BINS_PER_SIGMA) > ((np.int64(1) << 62) // L):
        raise OverflowError("discrete gaussian tail beyond int64")
    return base * L + _below(bg, BINS_PER_SIGMA * L), g


@njit(cache=True, inline="always")
def staircase_gaussian(bg, s, margin, fast_path, heights, cut, alias, fast, ratio, c, n_bins):
    """Z ~ N_ℤ(0, s²) exactly, S_MIN ≤ s ≤ S_MAX (module docstring), for the given tables,
    screen margin and fast accept.  :func:`staircase_draw` is the production setting; the tests
    also use 32-bin tables (a third of the draws from the tail), a margin of 1/64 and no fast
    accept (every draw through the screen, 3 % through :func:`decide_exactly`).  Every setting
    gives the same law.  The tables are frozen module constants where production calls it, so
    passing them costs no reference counting (the bit generator ``bg`` is why not the
    Generator: see *uniform bits*)."""
    if s < S_MIN or s > S_MAX:
        raise ValueError("staircase discrete gaussian: s outside [2^12, 2^50]")
    L = (s + BINS_PER_SIGMA - 1) // BINS_PER_SIGMA
    cut_mask = (np.int64(1) << CUT_BITS) - 1
    head_mask = (np.int64(1) << U_HEAD_BITS) - 1
    while True:
        # one uniform: slot (9 bits) | alias cut (33) | sign (1) | U's head (10)
        k = u53(bg)
        slot = k >> (53 - SLOT_BITS)
        other = alias[slot]
        # branch-free select (the comparison is a coin flip the predictor cannot learn)
        piece = other + np.int64(((k >> 11) & cut_mask) < cut[slot]) * (slot - other)
        head = k & head_mask
        if piece < n_bins:
            m = piece * L + _below(bg, L)
            f = fast[piece]
            # U < (head + 1)/2^10 ≤ A_j/2^63 decides from the head alone
            # (head + 1)·2^53 ≤ A_j, i.e. head < ⌊A_j/2^53⌋ (no shift that could overflow)
            if not (fast_path and head < (f >> 53)):
                u = (head << 53) | u53(bg)
                if not (fast_path and u < f):          # u + 1 ≤ A_j; u + 1 may be 2^63
                    if not _accept_slow(bg, m, s, 0, heights[piece], ratio[piece], c, u,
                                        margin):
                        continue
        elif piece == n_bins:
            m, g = _tail_value(bg, L, n_bins)
            u = (head << 53) | u53(bg)
            if not _accept_slow(bg, m, s, g, heights[n_bins], ratio[n_bins] * 2.0 ** g, c, u,
                                margin):
                continue
        else:
            continue                                   # the padding piece: reject
        if m == 0:
            if fair_bit(bg):
                continue
            return np.int64(0)
        return m - 2 * m * ((k >> 10) & 1)             # the sign bit


@njit(cache=True, inline="always")
def staircase_draw(bg, s):
    """Z ~ N_ℤ(0, s²) exactly, S_MIN ≤ s ≤ S_MAX (module docstring), with the production
    tables and screen."""
    return staircase_gaussian(bg, s, MARGIN, True, HEIGHTS, ALIAS_CUT, ALIAS_INDEX, FAST_ACCEPT,
                              RATIO, C_SCALE, N_BINS)
