"""Continual counting for one arm's reward stream (Chan, Shi & Song 2011, "Private and
Continual Release of Statistics", ACM TISSEC 14(3); docs/algorithms.md#binary-tree-counter,
docs/algorithms.md#logarithmic-counter, docs/algorithms.md#hybrid-counter).

Three counters, each written once as ``@njit`` state-update functions over arrays so compiled
policy kernels (DP-UCB, DP-TS) can run them per round, plus a thin Python wrapper that calls
the same compiled functions (one source; the per-round reference is ``.py_func``).

Protocol of every counter ``X`` (state: a float64 array ``fs`` and an int64 array ``ist``):

``X_push(fs, ist, x) -> (code, value, start, stop)``
    take item ``x``; if a release is due, ``code`` ≥ 0 names it in the counter's release table,
    ``value`` is the clean statistic to noise and ``[start, stop)`` the stream indices it
    touches; ``code = −1`` means no release this item.
``X_commit(fs, ist, code, noisy)``
    store the noisy value of the release just requested.
``X_output(fs, ist) -> float``
    the current noisy running count.
``X_step(fs, ist, x, rng, scales, rids, cols, n, run, arm) -> (output, n)``
    push, draw ``Lap(scales[code])`` through :func:`~dpledger.mechanisms.noise.laplace_row`
    (writing ledger row ``n`` with release id ``rids[code]``), commit — for float noise.
``X_run(…, xs, …, out) -> n``
    ``X_step`` over an array.

Exact (lattice) noise uses the same push/commit from Python: :class:`Counter` holds lattice
integers in the float64 state (exact below 2^53, checked) and draws each release through
:func:`~dpledger.mechanisms.noise.draw_and_record`.

Counters never add up privacy: each describes its releases; per-reward totals come from the
ledger and the accountants.

* **Binary mechanism** (CSS11 Alg. 2, "T-bounded"): parameterised by L, the most items it will
  ever hold; ``levels = ⌈log2(L+1)⌉`` (docs/algorithms.md#binary-tree-counter; ⌈log2 L⌉ is one
  level short at powers of two) and
  each p-sum gets ``Lap(levels/ε)``, sensitivity 1.  Item t closes the p-sum at level
  i = (lowest set bit of t) over items (t − 2^i, t].  DP-TS's epoch buffer is L = 2^{r+1} − 1.
* **Logarithmic mechanism** (CSS11 Alg. 1): each block sum gets one ``Lap(1/ε)``; the published
  value accumulates block sums and noise.  ``variant="original"`` closes a block when the count
  is a power of two (blocks {1}, {2}, {3,4}, {5..8}, …); ``variant="modified"`` (Hu & Hegde
  2022) when the count is 2^{r+1} − 1 (blocks of 1, 2, 4, … items).  Each item lies in exactly
  one block.
* **Hybrid mechanism** (CSS11 Alg. 3): an original logarithmic mechanism with ε/2, and for
  t ∈ (2^k, 2^{k+1}) a fresh binary mechanism with ε/2 over the items after 2^k; output
  ``L(2^k) + B(t − 2^k)``, and ``L(t)`` when t is a power of two.  Item 2^{k+1} is published by
  the logarithmic mechanism at that very time, so epoch k's binary mechanism holds at most
  2^k − 1 items: ``levels = k`` and its p-sums get ``Lap(2k/ε)`` (the bit-length rule of the
  binary counter; release code
  k).  Each item: one log block (ε/2) plus at most k p-sums of ε/(2k) — ε in all.
"""
from __future__ import annotations


import numpy as np
from dpledger._jit import njit

from dpledger.accounting.ledger import RewardLedger, RowBuffer
from dpledger.accounting.releases import Release
from dpledger.errors import DpledgerError, check_count, check_positive
from dpledger.mechanisms.basic import normalise
from dpledger.mechanisms.noise import draw_and_record, laplace_row
from dpledger.mechanisms.samplers import ExactSampler, FloatSampler, Sampler

HYBRID_MAX_EPOCH = 62          # epochs k ≤ 62 cover streams of up to 2^63 − 1 items
_EXACT_LIMIT = 2.0 ** 52       # lattice integers in the float64 state stay exact below this


def binary_levels(max_items: int) -> int:
    """``⌈log2(L + 1)⌉`` = the bit length of L (docs/algorithms.md#binary-tree-counter)."""
    return int(check_count("max_items", max_items)).bit_length()


# ---- binary mechanism: fs = [α_0..α_{L−1}, α̂_0..α̂_{L−1}, h_0..h_L], ist = [t, L, offset, max]
# (L = levels).  h_j = Σ α̂_l over the set bits l ≥ j of t, summed from the top level down, so
# the output h_0 is read in O(1) and a push rewrites only h_0..h_i (i = lowest set bit of t;
# amortised O(1)) instead of summing all L levels every round (DP-UCB: 8e6 → 1.5e7 rounds/s).
# The bits of t above i do not change at a push, so h_{i+1} is already right.


def binary_state_size(levels: int) -> int:
    """Length of the float state of a binary mechanism with ``levels`` levels."""
    return 3 * max(int(levels), 1) + 1


@njit(cache=True)
def binary_new(max_items, offset):
    levels = 0
    m = max_items
    while m > 0:
        levels += 1
        m >>= 1
    fs = np.zeros(3 * max(levels, 1) + 1)
    ist = np.array([0, levels, offset, max_items], dtype=np.int64)
    return fs, ist


@njit(cache=True, inline="always")
def binary_reset(fs, ist, levels, max_items, offset):
    for j in range(3 * levels + 1):
        fs[j] = 0.0
    ist[0] = 0
    ist[1] = levels
    ist[2] = offset
    ist[3] = max_items


@njit(cache=True, inline="always")
def binary_push(fs, ist, x):
    t = ist[0] + 1
    if t > ist[3]:
        raise ValueError("binary mechanism: more items than its bound L")
    i = 0
    while (t >> i) & 1 == 0:
        i += 1
    s = x
    for j in range(i):          # the p-sums below level i merge into the new one
        s += fs[j]
        fs[j] = 0.0
    fs[i] = s
    ist[0] = t
    stop = ist[2] + t
    return 0, s, stop - (1 << i), stop


@njit(cache=True, inline="always")
def binary_commit(fs, ist, code, noisy):
    levels = ist[1]
    t = ist[0]
    i = 0
    while (t >> i) & 1 == 0:
        i += 1
    for j in range(i):
        fs[levels + j] = 0.0
    fs[levels + i] = noisy
    h = 2 * levels
    out = fs[h + i + 1] + noisy           # the levels above i, then level i
    for j in range(i + 1):
        fs[h + j] = out


@njit(cache=True, inline="always")
def binary_output(fs, ist):
    """Σ of the noisy p-sums named by the set bits of t (top level first): h_0."""
    return fs[2 * ist[1]]


@njit(cache=True, inline="always")
def binary_step(fs, ist, x, rng, scales, rids, cols, n, run, arm):
    code, value, start, stop = binary_push(fs, ist, x)
    noise = laplace_row(rng, scales[code], cols, n, run, arm, start, stop, rids[code])
    binary_commit(fs, ist, code, value + noise)
    return binary_output(fs, ist), n + 1


@njit(cache=True)
def binary_run(fs, ist, xs, rng, scales, rids, cols, n, run, arm, out):
    for j in range(xs.shape[0]):
        out[j], n = binary_step(fs, ist, xs[j], rng, scales, rids, cols, n, run, arm)
    return n


# ---- logarithmic mechanism: fs = [published, pending], ist = [t, variant, offset, block_start]

@njit(cache=True)
def log_new(variant, offset):
    return np.zeros(2), np.array([0, variant, offset, 0], dtype=np.int64)


@njit(cache=True, inline="always")
def log_push(fs, ist, x):
    t = ist[0] + 1
    ist[0] = t
    fs[1] += x
    # original: block ends at t = 2^r; modified (Hu & Hegde): at t = 2^{r+1} − 1
    m = t if ist[1] == 0 else t + 1
    if m & (m - 1) == 0:
        return 0, fs[1], ist[2] + ist[3], ist[2] + t
    return -1, 0.0, 0, 0


@njit(cache=True, inline="always")
def log_commit(fs, ist, code, noisy):
    fs[0] += noisy
    fs[1] = 0.0
    ist[3] = ist[0]


@njit(cache=True, inline="always")
def log_output(fs, ist):
    return fs[0]


@njit(cache=True, inline="always")
def log_step(fs, ist, x, rng, scales, rids, cols, n, run, arm):
    code, value, start, stop = log_push(fs, ist, x)
    if code >= 0:
        noise = laplace_row(rng, scales[code], cols, n, run, arm, start, stop, rids[code])
        log_commit(fs, ist, code, value + noise)
        n += 1
    return log_output(fs, ist), n


@njit(cache=True)
def log_run(fs, ist, xs, rng, scales, rids, cols, n, run, arm, out):
    for j in range(xs.shape[0]):
        out[j], n = log_step(fs, ist, xs[j], rng, scales, rids, cols, n, run, arm)
    return n


# ---- hybrid: fs = [log fs (2) | binary fs (3·62 + 1)], ist = [log ist (4) | binary ist (4)]

@njit(cache=True)
def hybrid_new(offset):
    fs = np.zeros(2 + 3 * HYBRID_MAX_EPOCH + 1)
    ist = np.array([0, 0, offset, 0, 0, 0, offset, 0], dtype=np.int64)
    return fs, ist


@njit(cache=True, inline="always")
def hybrid_push(fs, ist, x):
    code, value, start, stop = log_push(fs[:2], ist[:4], x)
    if code == 0:
        # t = 2^k: the log mechanism publishes; epoch k's binary mechanism starts after it
        t = ist[0]
        k = 0
        while (t >> (k + 1)) > 0:
            k += 1
        if k > HYBRID_MAX_EPOCH:
            raise ValueError("hybrid mechanism: stream too long")
        binary_reset(fs[2:], ist[4:], k, (1 << k) - 1, ist[2] + t)
        return 0, value, start, stop
    bcode, value, start, stop = binary_push(fs[2:], ist[4:], x)
    return ist[5], value, start, stop         # code k = the epoch's number of levels


@njit(cache=True, inline="always")
def hybrid_commit(fs, ist, code, noisy):
    if code == 0:
        log_commit(fs[:2], ist[:4], code, noisy)
    else:
        binary_commit(fs[2:], ist[4:], code, noisy)


@njit(cache=True, inline="always")
def hybrid_output(fs, ist):
    return fs[0] + binary_output(fs[2:], ist[4:])


@njit(cache=True, inline="always")
def hybrid_step(fs, ist, x, rng, scales, rids, cols, n, run, arm):
    code, value, start, stop = hybrid_push(fs, ist, x)
    noise = laplace_row(rng, scales[code], cols, n, run, arm, start, stop, rids[code])
    hybrid_commit(fs, ist, code, value + noise)
    return hybrid_output(fs, ist), n + 1


@njit(cache=True)
def hybrid_run(fs, ist, xs, rng, scales, rids, cols, n, run, arm, out):
    for j in range(xs.shape[0]):
        out[j], n = hybrid_step(fs, ist, xs[j], rng, scales, rids, cols, n, run, arm)
    return n


def hybrid_epoch(t: int) -> int:
    """The epoch k = ⌊log2 t⌋ item t (1-based) belongs to."""
    return int(t).bit_length() - 1


# ---- Python wrappers ------------------------------------------------------------------------

class Counter:
    """One arm's continual counter, writing every release to ``ledger`` as it draws it.

    ``sampler``: :class:`FloatSampler` (compiled ``*_run``, Generator Laplace) or
    :class:`ExactSampler` (the same compiled push/commit, exact discrete-Laplace noise on the
    lattice; items are rounded to the lattice one by one and the accumulated rounding bias is
    kept in ``rounding_bias``).  Items are rewards in [lo, hi], counted normalised
    (docs/algorithms.md#reward-range).
    ``offset`` is the stream index of the counter's first item (a counter over a DP-TS epoch
    buffer starts mid-stream).  Outputs are noisy running sums in normalised reward units.
    """

    _push = _commit = _output = _run = None

    def __init__(self, sampler: Sampler, ledger: RewardLedger, *, epsilon: float, run: int = 0,
                 arm: int = 0, offset: int = 0, lo: float = 0.0, hi: float = 1.0):
        if not isinstance(sampler, (FloatSampler, ExactSampler)):
            raise DpledgerError(f"sampler must be a FloatSampler or ExactSampler, got {sampler!r}")
        if not isinstance(ledger, RewardLedger):
            raise DpledgerError(f"a RewardLedger is needed, got {type(ledger).__name__}")
        self.sampler, self.ledger = sampler, ledger
        self.epsilon = check_positive("epsilon", epsilon)
        self.run = check_count("run", run, minimum=0)
        self.arm = check_count("arm", arm, minimum=0)
        self.offset = check_count("offset", offset, minimum=0)
        self.lo, self.hi = lo, hi
        normalise([], lo, hi)
        self.rounding_bias = 0.0
        self.n_items = 0
        self.releases: list[Release] = []          # by release code
        self._rids = np.zeros(0, dtype=np.int64)
        self._scales = np.zeros(0)

    # release table ---------------------------------------------------------------------
    def _set_release_scales(self, scales: list[float]) -> None:
        """Release code c adds Lap(scales[c]) (reward units) to a sensitivity-1 statistic."""
        self.releases = [self.sampler.laplace_release(1.0, scale=b) for b in scales]
        self._rids = np.array([self.ledger.intern(r) for r in self.releases], dtype=np.int64)
        self._scales = np.array(scales, dtype=np.float64)

    # feeding ---------------------------------------------------------------------------
    def extend(self, rewards) -> np.ndarray:
        """Feed rewards in stream order; the noisy running count after each one."""
        x = normalise(rewards, self.lo, self.hi)
        self._check_room(x.size)
        out = np.empty(x.size)
        if isinstance(self.sampler, FloatSampler):
            buf = RowBuffer(max(x.size, 1))
            n = type(self)._run(self.fs, self.ist, x, self.sampler.rng, self._scales, self._rids,
                                buf.columns(), 0, self.run, self.arm, out)
            self.ledger.extend(buf, n)
        else:
            for j in range(x.size):
                out[j] = self._push_exact(x[j])
        self.n_items += x.size
        self.ledger.set_stream_length(self.run, self.arm, self.offset + self.n_items)
        return out

    def push(self, reward: float) -> float:
        return float(self.extend([reward])[0])

    def _push_exact(self, x: float) -> float:
        s = self.sampler
        m, bias = s.encode(x)
        self.rounding_bias += bias
        code, value, start, stop = type(self)._push(self.fs, self.ist, float(m))
        if code >= 0:
            noise = draw_and_record(s, self.releases[code], self.ledger, self.run, self.arm,
                                    int(start), int(stop))
            noisy = value + noise
            if abs(noisy) >= _EXACT_LIMIT:
                raise DpledgerError("exact counter left the range where float64 holds lattice "
                                    "integers exactly; use fewer lattice bits")
            type(self)._commit(self.fs, self.ist, code, float(noisy))
        return s.decode(int(type(self)._output(self.fs, self.ist)))

    def _check_room(self, n: int) -> None:
        if isinstance(self.sampler, ExactSampler) and (self.n_items + n) * self.sampler.unit >= _EXACT_LIMIT / 4:
            raise DpledgerError("too many items for exact lattice counting in float64 state; "
                                "use fewer lattice bits")

    @property
    def output(self) -> float:
        v = type(self)._output(self.fs, self.ist)
        return self.sampler.decode(int(v)) if isinstance(self.sampler, ExactSampler) else float(v)


class BinaryCounter(Counter):
    """Binary mechanism bounded by ``max_items`` = L (docs/algorithms.md#binary-tree-counter):
    ``levels = ⌈log2(L+1)⌉`` and each
    p-sum gets Lap(levels/ε) (release code 0)."""

    _push, _commit, _output, _run = (binary_push, binary_commit, binary_output, binary_run)

    def __init__(self, sampler: Sampler, ledger: RewardLedger, *, max_items: int, epsilon: float,
                 **kw):
        super().__init__(sampler, ledger, epsilon=epsilon, **kw)
        self.max_items = check_count("max_items", max_items)
        self.levels = binary_levels(self.max_items)
        self.fs, self.ist = binary_new(self.max_items, self.offset)
        self._set_release_scales([self.levels / self.epsilon])

    def _check_room(self, n: int) -> None:
        if self.n_items + n > self.max_items:
            raise DpledgerError(f"binary mechanism bounded by L = {self.max_items} items was fed "
                                f"{self.n_items + n}")
        super()._check_room(n)


class LogarithmicCounter(Counter):
    """Logarithmic mechanism, Lap(1/ε) per block (release code 0); ``variant`` "original"
    (blocks end at 2^r) or "modified" (Hu & Hegde: blocks end at 2^{r+1} − 1)."""

    _push, _commit, _output, _run = (log_push, log_commit, log_output, log_run)
    VARIANTS = {"original": 0, "modified": 1}

    def __init__(self, sampler: Sampler, ledger: RewardLedger, *, epsilon: float,
                 variant: str = "original", **kw):
        super().__init__(sampler, ledger, epsilon=epsilon, **kw)
        if variant not in self.VARIANTS:
            raise DpledgerError(f"variant must be 'original' or 'modified', got {variant!r}")
        self.variant = variant
        self.fs, self.ist = log_new(self.VARIANTS[variant], self.offset)
        self._set_release_scales([1.0 / self.epsilon])


class HybridCounter(Counter):
    """Hybrid mechanism (see module docstring): code 0 = log block Lap(2/ε); code k = a p-sum
    of epoch k's binary mechanism, Lap(2k/ε).  Release codes are interned up to the epoch of
    ``max_items`` (default 2^31 − 1)."""

    _push, _commit, _output, _run = (hybrid_push, hybrid_commit, hybrid_output, hybrid_run)

    def __init__(self, sampler: Sampler, ledger: RewardLedger, *, epsilon: float,
                 max_items: int = 2 ** 31 - 1, **kw):
        super().__init__(sampler, ledger, epsilon=epsilon, **kw)
        self.max_items = check_count("max_items", max_items)
        kmax = hybrid_epoch(self.max_items)
        if kmax > HYBRID_MAX_EPOCH:
            raise DpledgerError(f"hybrid mechanism supports at most 2^{HYBRID_MAX_EPOCH + 1} − 1 items")
        self.fs, self.ist = hybrid_new(self.offset)
        self._set_release_scales([2.0 / self.epsilon] + [2.0 * k / self.epsilon
                                                         for k in range(1, kmax + 1)])

    def _check_room(self, n: int) -> None:
        if self.n_items + n > self.max_items:
            raise DpledgerError(f"hybrid counter declared max_items = {self.max_items}, fed "
                                f"{self.n_items + n}")
        super()._check_room(n)
