"""Audits of whole policies on a neighbouring pair (docs/design.md#audits; docs/audits.md).

* **White-box** (``mode="whitebox"``): for the policies in :data:`LR_CAPTURE` the auditor sees
  every release containing the witness reward (full capture) and scores the sum of their
  log-likelihood ratios; for the others, the witness release — the noisy statistic the policy
  captured through ``capture=True`` (its first release of the witness arm, with the clean value
  beside it), scored by the released value.  LR audits also report ``best_possible``
  (:mod:`dpledger.audits.optimal`).
* **Black-box** (``mode="blackbox"``): the auditor sees only the action sequence, reduced to a
  score.  Candidate scores (all computed from rounds t* + 1 … stop, where t* is the changed row):

  - ``pulls``: the number of pulls of the witness arm;
  - ``next``: the first round the witness arm is pulled again (stop + 1 if never);
  - ``fitted``: a linear score on per-epoch counts — pulls of each arm in the dyadic windows
    (t*, t*+1], (t*+1, t*+3], (t*+3, t*+7], … — with weights fitted on the selection trials only
    (Fisher's discriminant, ridge-regularised), so it is a fixed function for the count trials.

  ``score="auto"`` (default) lets the selection split choose among the three (and the direction
  and threshold).  Runs stop at the last round the score needs: ``stop_at``, or the pair's
  ``stop_hint``, or T.

Trials.  Side s (0 for D, 1 for D′) is cut into chunks of ``CHUNK`` trials; chunk c draws from
the Generator ``PCG64(SeedSequence(seed, spawn_key=(s, c)))`` — one SeedSequence tree, so any
worker count gives the same trials.  For a :class:`~dpledger.policies.base.KernelPolicy` whose
``run_one`` is the base one, one compiled call per chunk runs the policy's numba kernel once per
trial (the same function ``run_one`` calls, with ``stop_at``) and keeps only what the score
reads: the white-box score (the captured release, or the likelihood ratio of every release
containing the witness) or the black-box features (per-window counts, next pull); an
event-driven policy (``emits_segments``) runs its ``segment_kernel``, which jumps over each
stretch, and the features are read off its segments.  The chunk loops release the GIL, so
``workers`` > 1 runs chunks in threads over one compiled copy; any other
:class:`~dpledger.policies.base.Policy` goes through ``run_one`` (in processes when
``workers`` > 1).  A SeedSequence-seeded Generator per trial would cost tens of µs of Python
per trial (46 µs measured on the loaded 2-core machine) — more than a white-box trial itself,
≥ 46 s per 1e6 trials: the chunk streams keep that cost per chunk.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np
from dpledger._jit import njit

from dpledger.audits.pairs import NeighbourPair, default_pair
from dpledger.audits.result import (AuditResult, certificate_summary, currency_of, GDP_DELTA,
                                    plot_data_fixed, plot_data_sequential)
from dpledger.audits.stats import (DEFAULT_CONFIDENCE, DEFAULT_SELECTION_FRACTION, audit_scores,
                                   ceiling, check_options, split_sizes)
from dpledger.errors import DpledgerError, check_count, counted
from dpledger.interrupt import interruptible_pool, raise_if_stopped


class _Missing(Exception):
    """Some white-box trials made no witness release within the rounds played."""

CHUNK = 2048
ROUNDS_PER_CALL = 1 << 20       # rounds per compiled call of a chunk's trials (≤ 0.3 s at the
                                # slowest kernel measured, 3.2e6 rounds/s: lazy-dp-ts black-box
                                # at T = 1e4); Ctrl-C is heard between calls
SCORES = ("pulls", "next", "fitted")
DEFAULT_BLACKBOX_T = 1000
DEFAULT_WHITEBOX_T = 1000


# ---- compiled trial loop -----------------------------------------------------------------------

@njit(cache=True)
def _features(actions, played, edges, arm, tstar, stop, counts, i):
    """Per-window pulls of each arm over rounds tstar+1 … played into counts[i]; returns the
    first round > tstar at which ``arm`` is played (stop + 1 if none).  ``arm`` = −1 means the
    arm a* played at t* (whichever it is: the changed row holds the witness for every arm);
    arms are then relabelled (a − a*) mod K, so feature 0 is always a* 's."""
    nxt = stop + 1
    if counts.shape[1] == 0:             # white-box: no black-box features wanted
        return nxt
    w = 0
    K = counts.shape[2]
    shift = 0
    if arm < 0:
        shift = actions[tstar - 1]
        arm = shift
    for t in range(tstar + 1, played + 1):
        while t > edges[w + 1]:
            w += 1
        a = actions[t - 1]
        b = a - shift                    # (a − a*) mod K without the division: |a − a*| < K
        if b < 0:
            b += K
        counts[i, w, b] += 1
        if a == arm and nxt > stop:
            nxt = t
    return nxt


@njit(cache=True)
def _segment_features(segs, n_segs, played, edges, arm, tstar, stop, counts, i):
    """:func:`_features` from the play's segments (arm, first_round, stride, length) instead of
    its actions — O(segments × windows), not O(rounds): the counts of a segment in a window are
    the terms of its arithmetic run of rounds falling in the window.  Same result, bit for
    bit (``test_audits_speed`` checks it against :func:`_features` on the materialised
    actions)."""
    nxt = stop + 1
    W = counts.shape[1]
    if W == 0:
        return nxt
    K = counts.shape[2]
    shift = 0
    if arm < 0:                          # the arm played at t*
        for j in range(n_segs):
            f, s, m = segs[1, j], segs[2, j], segs[3, j]
            if f <= tstar <= f + (m - 1) * s and (tstar - f) % s == 0:
                shift = segs[0, j]
                break
        arm = shift
    for j in range(n_segs):
        a, f, s, m = segs[0, j], segs[1, j], segs[2, j], segs[3, j]
        r0 = f                           # the segment's rounds after t*, up to ``played``:
        if r0 <= tstar:                  # f + k·s for k0 ≤ k ≤ k1
            r0 = f + ((tstar - f) // s + 1) * s
        r1 = f + (m - 1) * s
        if r1 > played:
            r1 = f + ((played - f) // s) * s
        if r1 < r0:
            continue
        b = a - shift
        if b < 0:
            b += K
        if a == arm and r0 < nxt:
            nxt = r0
        w = 0
        while edges[w + 1] < r0:         # the first window holding r0
            w += 1
        if s == 1:                       # contiguous (most segments): no division
            while True:
                hi = min(edges[w + 1], r1)
                counts[i, w, b] += hi - max(edges[w] + 1, r0) + 1
                if hi == r1:
                    break
                w += 1
        else:
            while True:
                hi = min(edges[w + 1], r1)   # terms in (max(lo, r0 − 1), hi]
                lo = max(edges[w], r0 - 1)
                counts[i, w, b] += (hi - r0) // s - (lo - r0) // s
                if hi == r1:
                    break
                w += 1
    return nxt


@njit(nogil=True)
def _batch(kernel, rng, env, T, K, stop, params, n, rows, cap, edges, arm, tstar,
           counts, nxt, rel, cln):
    actions = np.zeros(stop, np.int64)
    for i in range(n):
        if cap.shape[1] > 0:
            cap[0, 0] = np.nan
            cap[1, 0] = np.nan
        played, _, _ = kernel(rng, env, T, K, stop, params, actions, rows, cap)
        if cap.shape[1] > 0:
            rel[i] = cap[0, 0]
            cln[i] = cap[1, 0]
        nxt[i] = _features(actions, played, edges, arm, tstar, stop, counts, i)
    return n


@njit(nogil=True)
def _batch_segments(kernel, rng, env, T, K, stop, params, n, rows, cap, segs, edges, arm,
                    tstar, counts, nxt, rel, cln):
    """:func:`_batch` for an event-driven policy: its ``segment_kernel`` describes each trial's
    play by segments (O(events) per trial, no action array) and the features are read off them
    (:func:`_segment_features`).  The segment kernel is the one ``kernel`` wraps, so the draws
    — and every trial — are those of :func:`_batch`."""
    no_actions = np.zeros(0, np.int64)
    for i in range(n):
        if cap.shape[1] > 0:
            cap[0, 0] = np.nan
            cap[1, 0] = np.nan
        played, _, _, segs, n_segs = kernel(rng, env, T, K, stop, params, no_actions, rows, cap,
                                            segs)
        if cap.shape[1] > 0:
            rel[i] = cap[0, 0]
            cln[i] = cap[1, 0]
        nxt[i] = _segment_features(segs, n_segs, played, edges, arm, tstar, stop, counts, i)
    return n



@njit(cache=True)
def gaussian_posterior_llr(actions, cap, K, t_star, stop, delta, c, side):
    """The log-likelihood ratio log p_D′/p_D of every posterior read that contains the witness
    reward, for the Gaussian TS kernels of :mod:`dpledger.policies.ou` (full capture: column
    (t−1)·K + j holds θ, the clean mean S/(k+1) and σ of arm j at round t).

    The witness row t* changes for every arm, so it enters the sum of the arm a* played at t*
    and every later read of a* contains it: at round t > t* the read is θ ~ N(m, σ²) with
    σ² = c/(k+1) and the two means differ by d = Δ/(k+1) = Δσ²/c (Δ = hi − lo).  Given the same
    history, LLR_t = ((θ − m_D)·d − d²/2)/σ², with m_D the mean under D: the captured mean on
    side 0, the captured mean − d on side 1 (the auditor knows both tables and the actions).
    The sum over t is the Neyman–Pearson statistic of the whole transcript (the actions add
    only data-independent randomness given the reads): a weighted sum of the Gaussian reads."""
    a = actions[t_star - 1]
    s = 0.0
    for t in range(t_star + 1, stop + 1):
        col = (t - 1) * K + a
        y = cap[0, col]
        if np.isnan(y):
            continue
        var = cap[2, col] * cap[2, col]
        d = delta * var / c
        m_d = cap[1, col] - side * d
        s += ((y - m_d) * d - 0.5 * d * d) / var
    return s


@njit(nogil=True)
def _batch_gauss(kernel, rng, env, T, K, stop, params, n, rows, cap, edges, arm, tstar,
                 counts, nxt, score, delta, c, side):
    actions = np.zeros(stop, np.int64)
    for i in range(n):
        played, _, _ = kernel(rng, env, T, K, stop, params, actions, rows, cap)
        score[i] = gaussian_posterior_llr(actions, cap, K, tstar, played, delta, c, side)
        nxt[i] = _features(actions, played, edges, arm, tstar, stop, counts, i)
    return n



@njit(cache=True)
def witness_observation(actions, t_star):
    """(a*, w): the arm played at t* and the witness's index in its stream (a* 's pulls before
    t*).  The witness row t* changes for every arm, so the witness is observation w of a*."""
    a = actions[t_star - 1]
    w = 0
    for t in range(t_star - 1):
        if actions[t] == a:
            w += 1
    return a, w


@njit(cache=True)
def laplace_release_llr(actions, played, cap, t_star, delta, side):
    """(LLR, releases, last round, overflow) of the Laplace releases that contain the witness
    reward, from a full (6, M) capture (:func:`~dpledger.policies.rules.capture_release`).

    The witness row t* changes for every arm, so the witness is observation w of the arm a*
    played at t* (w = pulls of a* before t*); a release contains it when it is a* 's sum over
    observations [start, stop) with start ≤ w < stop.  Its clean sum differs by Δ = hi − lo
    between D and D′ given the same history, so its conditional LLR is
    (|y − c_D| − |y − c_D − Δ|)/b = clip(2(y − c_D) − Δ, −Δ, Δ)/b (the clip makes the atoms ±Δ/b
    exact), with c_D the captured clean sum on side 0 and the captured sum − Δ on side 1; the
    sum over the releases is the Neyman–Pearson statistic of the whole transcript.  The last
    round is the round of a* 's observation ``max stop`` (the last round the score reads)."""
    a, w = witness_observation(actions, t_star)
    n = np.int64(cap[5, 0])
    s = 0.0
    m = 0
    last_obs = 0
    for c in range(1, n + 1):
        if np.int64(cap[3, c]) == a and cap[4, c] <= w and w < cap[5, c]:
            b = cap[2, c]
            u = 2.0 * (cap[0, c] - (cap[1, c] - side * delta)) - delta
            u = min(delta, max(-delta, u))
            s += u / b
            m += 1
            if np.int64(cap[5, c]) > last_obs:
                last_obs = np.int64(cap[5, c])
    last = t_star
    k = 0
    for t in range(played):
        if actions[t] == a:
            k += 1
            if k == last_obs:
                last = t + 1
                break
    return s, m, last, cap[4, 0] != 0.0


@njit(cache=True)
def gaussian_release_llr(actions, played, cap, t_star, delta, side):
    """(LLR, releases, overflow) of the Gaussian releases that contain the witness reward, from a
    full (6, M) capture whose columns are releases of a *mean*: row 0 the released value y, 1
    the clean mean, 2 its σ, 3 the arm, 4 and 5 the observations [start, stop) it averages
    (DP-TS-UCB's fresh samples, :mod:`dpledger.policies.hu2025`).

    The witness is observation w of the arm a* played at t* (w = pulls of a* before t*); a
    release contains it when start ≤ w < stop, and its clean mean then differs by
    d = Δ/(stop − start) between D and D′ given the same history, so its conditional LLR is
    ((y − m_D)·d − d²/2)/σ² with m_D the captured mean on side 0 and the captured mean − d on
    side 1.  The sum is the Neyman–Pearson statistic of the whole transcript (Dong–Roth–Su 2022:
    a weighted sum of Gaussian releases, composed μ² = Σ d²/σ²)."""
    a, w = witness_observation(actions, t_star)
    n = np.int64(cap[5, 0])
    s = 0.0
    m = 0
    for c in range(1, n + 1):
        if np.int64(cap[3, c]) == a and cap[4, c] <= w and w < cap[5, c]:
            var = cap[2, c] * cap[2, c]
            d = delta / (cap[5, c] - cap[4, c])
            m_d = cap[1, c] - side * d
            s += ((cap[0, c] - m_d) * d - 0.5 * d * d) / var
            m += 1
    return s, m, cap[4, 0] != 0.0


@njit(nogil=True)
def _batch_releases(kernel, rng, env, T, K, stop, params, n, rows, cap, edges, arm, tstar,
                    counts, nxt, score, nrel, lastr, delta, side, gaussian):
    """Full-capture trials scored by :func:`laplace_release_llr` (``gaussian`` False: also the
    last round the score read) or :func:`gaussian_release_llr`; returns the number of trials
    whose capture overflowed."""
    actions = np.zeros(stop, np.int64)
    over = 0
    for i in range(n):
        cap[5, 0] = 0.0
        cap[4, 0] = 0.0
        played, _, _ = kernel(rng, env, T, K, stop, params, actions, rows, cap)
        if gaussian:
            s, m, o = gaussian_release_llr(actions, played, cap, tstar, delta, side)
        else:
            s, m, last, o = laplace_release_llr(actions, played, cap, tstar, delta, side)
            lastr[i] = last
        score[i] = s
        nrel[i] = m
        if o:
            over += 1
        nxt[i] = _features(actions, played, edges, arm, tstar, stop, counts, i)
    return over


# White-box likelihood-ratio captures: policies whose kernels capture every release that touches
# the witness reward, and the score of the whole vector.  Policies not listed are scored by the
# single captured witness release (``released``).
# DP-KLUCB / DP-IMED (policies/azize2025.py) capture every phase release, and in the
# renoise-cumulative variant every re-noised cumulative sum (each contains all earlier rewards of
# the arm).
LR_CAPTURE = {"ts-gaussian": "gaussian-posterior", "mts-gaussian": "gaussian-posterior",
              "dp-ts": "laplace-releases", "dp-ucb": "laplace-releases",
              "dp-ts-mt": "laplace-releases", "dp-ts-ucb": "gaussian-releases",
              "dp-klucb": "laplace-releases", "dp-imed": "laplace-releases"}


# What a white-box audit captured (audit.json's ``whitebox_capture``), per LR_CAPTURE score.
WHITEBOX_CAPTURE = {
    "laplace-releases": ("every Laplace release containing the witness reward (DP-TS: log-"
                         "mechanism blocks and binary-mechanism p-sums; DP-UCB, private TS: "
                         "p-sums and gap batches; DP-KLUCB, DP-IMED: phase sums), scored by the "
                         "sum of their log-likelihood ratios"),
    "gaussian-releases": ("every fresh Gaussian sample of a model containing the witness reward "
                          "(sensitivity 1/n on an epoch mean of n), scored by the sum of their "
                          "log-likelihood ratios"),
    "gaussian-posterior": ("every posterior read of the arm played at t* after t* (all reads "
                           "that contain the witness reward), scored by the sum of their "
                           "log-likelihood ratios"),
    "single": ("the witness arm's first release only (this policy's kernel does not capture "
               "every release touching the witness)"),
}


def windows(t_star: int, stop: int) -> np.ndarray:
    """Dyadic window edges after t*: t*, t*+1, t*+3, t*+7, …, stop (window w = (e_w, e_{w+1}])."""
    edges = [t_star]
    width = 1
    while edges[-1] < stop:
        edges.append(min(stop, edges[-1] + width))
        width *= 2
    if len(edges) == 1:
        edges.append(t_star)
    return np.array(edges, dtype=np.int64)


def chunk_generator(seed: int, side: int, chunk: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(
        np.random.SeedSequence(entropy=int(seed), spawn_key=(int(side), int(chunk)))))


def _uses_kernel(policy) -> bool:
    from dpledger.policies.base import KernelPolicy
    return isinstance(policy, KernelPolicy) and type(policy).run_one is KernelPolicy.run_one


def _run_chunk(policy, env_tuple, T: int, K: int, stop: int, n: int, seed: int, side: int,
               chunk: int, capture: bool, edges: np.ndarray, arm: int, t_star: int,
               lr: str | None = None, delta: float = 1.0) -> dict:
    rng = chunk_generator(seed, side, chunk)
    # white-box scores read the captured releases only: no black-box features (W = 0)
    W = 0 if capture else edges.size - 1
    counts = np.zeros((n, W, K), dtype=np.int32)
    nxt = np.zeros(n, dtype=np.int64)
    rel = np.full(n, np.nan)
    cln = np.full(n, np.nan)
    last = np.zeros(n, dtype=np.int64)
    # compiled calls of at most ROUNDS_PER_CALL rounds (same Generator, same arrays: the trials
    # are those of one call), so that Ctrl-C is heard between them (dpledger.interrupt)
    step = max(1, ROUNDS_PER_CALL // max(int(stop), 1))
    spans = [(i, min(n, i + step)) for i in range(0, n, step)]

    def calls(batch, spec):
        """``batch(*play, m, *buffers, counts, nxt, *per_trial, *tail)`` once per span, with
        the span's views of the per-trial arrays; the sum of what the calls return."""
        play, buffers, per_trial, tail = spec
        total = 0
        for i0, i1 in spans:
            raise_if_stopped()
            total += batch(*play, i1 - i0, *buffers, counts[i0:i1], nxt[i0:i1],
                           *(a[i0:i1] for a in per_trial), *tail)
        return total

    if _uses_kernel(policy):
        play = (type(policy).kernel, rng, env_tuple, T, K, stop, policy.kernel_params(T, K))
    if lr == "gaussian-posterior" and _uses_kernel(policy):
        rows = np.zeros((5, max(policy.row_capacity(T, K), 1)), dtype=np.int64)
        cap = np.full((3, stop * K), np.nan)
        calls(_batch_gauss, (play, (rows, cap, edges, arm, t_star), (rel,),
                             (float(delta), float(policy.c), float(side))))
    elif lr in ("laplace-releases", "gaussian-releases") and _uses_kernel(policy):
        rows = np.zeros((5, max(policy.row_capacity(T, K), 1)), dtype=np.int64)
        gaussian = lr == "gaussian-releases"
        # every release of every arm: Laplace, at most one p-sum or block per pull; Gaussian,
        # at most K fresh samples a round; plus slack
        cap = np.zeros((6, (K * stop + 8) if gaussian else (2 * stop + 2 * K + 8)))
        over = calls(_batch_releases, (play, (rows, cap, edges, arm, t_star), (rel, cln, last),
                                       (float(delta), float(side), gaussian)))
        if over:
            raise DpledgerError(f"{counted(over, 'trial')} overflowed the white-box capture buffer")
    elif _uses_kernel(policy) and policy.emits_segments():
        # event-driven: the segment kernel jumps over each stretch (O(events) per trial)
        rows = np.zeros((5, max(policy.row_capacity(T, K), 1)), dtype=np.int64)
        segs = np.zeros((4, max(policy.segment_capacity(T, K), 1)), dtype=np.int64)
        cap = np.zeros((2, 1)) if capture else np.zeros((2, 0))
        calls(_batch_segments, ((type(policy).segment_kernel,) + play[1:],
                                (rows, cap, segs, edges, arm, t_star), (rel, cln), ()))
    elif _uses_kernel(policy):
        rows = np.zeros((5, max(policy.row_capacity(T, K), 1)), dtype=np.int64)
        # one column: the witness release.  (Kernels that support full capture, e.g. the
        # Gaussian TS of ``ou.py``, switch to it when the array has ≥ stop·K columns.)
        cap = np.zeros((2, 1)) if capture else np.zeros((2, 0))
        calls(_batch, (play, (rows, cap, edges, arm, t_star), (rel, cln), ()))
    else:
        for i in range(n):
            raise_if_stopped()
            out = policy.run_one(rng, env_tuple, T, stop_at=stop, capture=capture)
            acts = np.asarray(out.actions, dtype=np.int64)
            full = np.zeros(stop, dtype=np.int64)
            full[:acts.size] = acts
            nxt[i] = _features(full, acts.size, edges, arm, t_star, stop, counts, i)
            if capture and out.captured:
                rel[i] = out.captured["released"][0]
                cln[i] = out.captured["clean"][0]
    return {"counts": counts, "next": nxt, "released": rel, "clean": cln, "last": last}


def run_trials(policy, env, T: int, n: int, *, seed: int, side: int, stop: int, capture: bool,
               arm: int, t_star: int, workers: int = 1,
               progress: Callable[[int], None] | None = None, start: int = 0,
               lr: str | None = None, delta: float = 1.0) -> dict:
    """Trials start … start + n − 1 of ``policy`` on ``env`` (rounds 1 … stop), side ``side``.

    Trial i is the (i mod CHUNK)-th trial of chunk i // CHUNK, and a chunk is always played from
    its first trial, so a trial's outcome depends on (seed, side, i) only — not on how the trials
    are batched (sequential audits draw more batches later)."""
    K = env.n_arms
    edges = windows(t_star, stop)
    end = start + n
    first_chunk = start // CHUNK
    chunks = list(range(first_chunk, math.ceil(end / CHUNK)))
    sizes = [min(CHUNK, end - c * CHUNK) for c in chunks]
    skip = start - first_chunk * CHUNK
    et = env.as_tuple()
    args = [(policy, et, T, K, stop, m, seed, side, c, capture, edges, arm, t_star, lr, delta)
            for c, m in zip(chunks, sizes, strict=True)]
    parts = []
    if workers <= 1 or len(args) == 1:
        for a in args:
            parts.append(_run_chunk(*a))
            if progress is not None:
                progress(a[5])
    else:
        # the compiled chunk loops release the GIL (nogil): threads share one compiled copy —
        # no pickling, no compile per process; a chunk's trials do not depend on its thread.
        # Python-only policies run in processes.
        kind = "thread" if _uses_kernel(policy) else "process"
        with interruptible_pool(kind, min(workers, len(args))) as pool:
            futs = [pool.submit(_run_chunk, *a) for a in args]
            for a, f in zip(args, futs, strict=True):
                parts.append(f.result())
                if progress is not None:
                    progress(a[5])
    return {k: np.concatenate([p[k] for p in parts])[skip:] for k in parts[0]}


# ---- memory ----------------------------------------------------------------------------------

_TABLE_COPIES = 8           # the pair's design table, D and D′ with their working copies and the
                            # two environments built from them (measured: 7 copies of T × K
                            # float64 at T = 1e7, `audit lazy-dp-ts --trials 4`)
_AUDIT_SLACK = 256 << 20    # interpreter, numba, compiled trial loops, scores' selection


def _windows_at_most(stop: int, mode: str) -> int:
    """Black-box feature windows of a play of ``stop`` rounds (:func:`windows`, at most
    log2(stop) + 2, reached for a witness at round 1); none in white-box mode."""
    return 0 if mode == "whitebox" else int(stop).bit_length() + 1


def _trial_bytes(stop: int, K: int, mode: str) -> int:
    """Bytes one trial of one side keeps until the scores are computed: the black-box features
    (per-window pull counts, int32, and their float64 copy for the fitted score), the next-pull
    round, captured value, clean value and last round, twice over (the chunks' arrays and their
    concatenation), and the candidate scores."""
    W = _windows_at_most(stop, mode)
    return 2 * (4 * 8 + 4 * W * K) + 3 * 8 + 8 * W * K


def _chunk_bytes(policy, T: int, K: int, stop: int, lr: str | None, mode: str) -> int:
    """Bytes one chunk of :func:`_run_chunk` allocates while its trials play: the action array
    of ``stop`` rounds (or a segment buffer), the row buffer, the capture buffer of the score in
    use (:data:`LR_CAPTURE`), and the chunk's feature arrays."""
    W = _windows_at_most(stop, mode)
    rows = 5 * 8 * max(int(policy.row_capacity(T, K)), 1) if _uses_kernel(policy) else 0
    if lr == "gaussian-posterior":
        cap = 3 * 8 * stop * K
    elif lr == "laplace-releases":
        cap = 6 * 8 * (2 * stop + 2 * K + 8)
    elif lr == "gaussian-releases":
        cap = 6 * 8 * (K * stop + 8)
    else:
        cap = 16
    if _uses_kernel(policy) and policy.emits_segments() and lr is None:
        play = 4 * 8 * max(int(policy.segment_capacity(T, K)), 1)
    else:
        play = 8 * stop * (2 if not _uses_kernel(policy) else 1)
    return rows + cap + play + CHUNK * (4 * W * K + 4 * 8)


def memory_estimate(policy, T: int, K: int, trials: int, mode: str, workers: int = 1,
                    lr: str | None = None, pair_given: bool = False) -> dict:
    """Bytes an audit of ``trials`` trials per side holds at its peak, before anything is
    allocated (the stop round is at most T, the witness round at least 1: an upper estimate of
    the features), as {"bytes", "pair", "per_trial", "chunks", "held_trials"}: the pair's
    tables (:data:`_TABLE_COPIES` copies of T × K float64, unless given), ``workers`` chunks
    at once (:func:`_chunk_bytes`), and both sides' trials (:func:`_trial_bytes`)."""
    T, K, trials = int(T), int(K), int(trials)
    pair = 0 if pair_given else _TABLE_COPIES * 8 * T * K
    per_trial = 2 * _trial_bytes(T, K, mode)
    chunks = max(1, int(workers)) * _chunk_bytes(policy, T, K, T, lr, mode)
    return {"bytes": _AUDIT_SLACK + pair + chunks + per_trial * trials, "pair": pair,
            "per_trial": per_trial, "chunks": chunks, "held_trials": trials}


def check_memory(policy, T: int, K: int, trials: int, mode: str, workers: int = 1,
                 lr: str | None = None, pair_given: bool = False,
                 sequential: bool = False) -> dict:
    """:func:`memory_estimate` of an audit, refused with the estimate and what would fit
    (:func:`dpledger.resources.check_fits`).  A sequential audit holds its first batch
    (``trials``) and one later batch of at most :data:`SEQUENTIAL_BATCH` trials."""
    from dpledger.audits.stats import SEQUENTIAL_BATCH
    from dpledger.resources import available_memory, check_fits, fmt_bytes, largest_fitting
    held = trials + (min(SEQUENTIAL_BATCH, 100 * trials) if sequential else 0)
    est = memory_estimate(policy, T, K, held, mode, workers, lr, pair_given)
    avail = available_memory()
    fixed = est["bytes"] - est["per_trial"] * held
    if avail is not None and fixed > avail:
        fix = ("use a smaller --horizon (the pair's tables and each worker's arrays grow with "
               f"it: {fmt_bytes(fixed)} before any trial)"
               + ("; or fewer --workers" if workers > 1 and est["chunks"] > est["pair"] else ""))
    else:
        fits = largest_fitting(est["per_trial"], fixed, avail)
        fix = (f"use fewer --trials (each trial of both sides keeps about "
               f"{fmt_bytes(est['per_trial'])}; at most {fits} fit"
               + (", first batch included" if sequential else "") + ")")
    check_fits("this audit", est["bytes"], fix, avail)
    return est


# ---- scores ----------------------------------------------------------------------------------

def fisher_weights(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """Fisher's discriminant w = (S + λI)⁻¹(m₁ − m₀), S the pooled covariance, λ a small ridge
    (1e-3 of its mean variance); fitted on selection trials only."""
    m0, m1 = x0.mean(axis=0), x1.mean(axis=0)
    p = x0.shape[1]
    s = 0.5 * (np.cov(x0, rowvar=False).reshape(p, p) + np.cov(x1, rowvar=False).reshape(p, p))
    lam = 1e-3 * max(float(np.trace(s)) / p, 1e-12) + 1e-12
    return np.linalg.solve(s + lam * np.eye(p), m1 - m0)


def blackbox_scores(f0: dict, f1: dict, arm: int, m0: int, m1: int, which: str,
                    weights: np.ndarray | None = None) -> tuple[dict, dict, dict]:
    """Candidate scores of both sides; the fitted score's weights use the first m0 / m1 trials
    (the selection split) only — or are the given ``weights`` (fitted earlier, sequential)."""
    names = SCORES if which == "auto" else (which,)
    s0, s1, info = {}, {}, {}
    for name in names:
        if name == "pulls":
            s0[name] = f0["counts"][:, :, arm].sum(axis=1).astype(np.float64)
            s1[name] = f1["counts"][:, :, arm].sum(axis=1).astype(np.float64)
        elif name == "next":
            s0[name] = f0["next"].astype(np.float64)
            s1[name] = f1["next"].astype(np.float64)
        elif name == "fitted":
            x0 = f0["counts"].reshape(f0["counts"].shape[0], -1).astype(np.float64)
            x1 = f1["counts"].reshape(f1["counts"].shape[0], -1).astype(np.float64)
            if weights is not None:
                w = weights if weights.size == x0.shape[1] else np.zeros(x0.shape[1])
            elif x0.shape[1] == 0 or min(m0, m1) < 3:      # nothing to fit on
                s0[name], s1[name] = np.zeros(x0.shape[0]), np.zeros(x1.shape[0])
                continue
            else:
                w = fisher_weights(x0[:m0], x1[:m1])
            s0[name], s1[name] = x0 @ w, x1 @ w
            info["fitted_weights"] = [float(v) for v in w]
        else:
            raise DpledgerError(f"unknown black-box score {name!r}; known: auto, {', '.join(SCORES)}")
    return s0, s1, info


# ---- the audit -------------------------------------------------------------------------------

def audit_policy(policy, *, trials: int, mode: str = "blackbox", T: int | None = None, K: int = 2,
                 pair: NeighbourPair | None = None, lo: float = 0.0, hi: float = 1.0,
                 score: str = "auto", stop_at: int | None = None, seed: int = 0,
                 confidence: float = DEFAULT_CONFIDENCE,
                 selection_fraction: float = DEFAULT_SELECTION_FRACTION, workers: int = 1,
                 progress: Callable[[int, int], None] | None = None,
                 design_options: dict | None = None, sampler: str = "float",
                 until_ratio: float | None = None, max_trials: int | None = None,
                 whitebox_score: str = "auto", betting: bool = False,
                 claim: float | None = None) -> AuditResult:
    """Audit ``policy`` on a neighbouring pair with ``trials`` runs per stream.

    Defaults (docs/design.md#audits): the default pair
    (:func:`~dpledger.audits.pairs.default_pair`), K = 2, T = 1000, seed 0, selection fraction 0.1,
    confidence 0.95.  ``sampler="exact"`` audits the exact-sampler form (lattice rewards and noise,
    see :func:`dpledger.policies.simulator.simulate`) against its own certificate.

    ``until_ratio`` / ``max_trials`` make the audit sequential
    (:func:`~dpledger.audits.stats.sequential_audit`): ``trials`` per side first, doubling up to
    ``max_trials`` (default 100 × trials), until the bound reaches ``until_ratio`` × certificate
    or can no longer; the bound holds at that stopping time.  ``betting=True`` makes it the
    betting e-process of :mod:`dpledger.audits.betting` instead (pure ε, or μ for a GDP
    certificate: a mixture over a fixed ε grid): it stops
    at the first pair of trials at which ``claim`` (default: the certificate) is contradicted or
    ``until_ratio`` × certificate is reached, up to ``max_trials`` per side.  White-box audits of policies in
    :data:`LR_CAPTURE` score the LLR of every release containing the witness
    (``whitebox_score="auto"``); ``"released"`` scores the single captured witness release.  Every result carries ``ceiling``,
    the largest bound its trial count can certify (:func:`~dpledger.audits.stats.ceiling`)."""
    from dpledger.audits.stats import check_kernel_policy
    from dpledger.policies.base import validate_horizon
    check_kernel_policy(policy, mode, "its neighbours are contextual records, audited by "
                                      "dpledger.audits.contextual.audit_contextual")
    trials = check_count("trials", trials, minimum=2)
    _, selection_fraction = check_options(confidence, selection_fraction)
    seed = check_count("seed", seed, minimum=0)
    workers = check_count("workers", workers, minimum=1)
    if score != "auto" and score not in SCORES:
        raise DpledgerError(f"unknown black-box score {score!r}; known: auto, {', '.join(SCORES)}")
    if pair is None:
        if T is None:
            T = DEFAULT_BLACKBOX_T if mode == "blackbox" else DEFAULT_WHITEBOX_T
        T = validate_horizon(T, K if isinstance(K, int) and K >= 1 else 1)
    # before the pair's tables and the trials' arrays exist (issue 25 §1)
    check_memory(policy, T if pair is None else pair.horizon if T is None else T,
                 K if pair is None else pair.n_arms, trials, mode, workers,
                 LR_CAPTURE.get(getattr(policy, "name", "")) if (
                     mode == "whitebox" and sampler == "float" and whitebox_score == "auto")
                 else None, pair_given=pair is not None,
                 sequential=until_ratio is not None or max_trials is not None)
    if pair is None:
        pair = default_pair(policy, T, K, lo, hi, whitebox=mode == "whitebox",
                            **(design_options or {}))
    else:
        if not isinstance(pair, NeighbourPair):
            raise DpledgerError("pair must be a NeighbourPair (see NeighbourPair.from_tables)")
        T = pair.horizon if T is None else validate_horizon(T, pair.n_arms)
        if T > pair.horizon:
            raise DpledgerError(f"the pair's tables have {pair.horizon} rows, fewer than T = {T}")
    K = pair.n_arms
    t_star = pair.round
    arm = pair.arm if pair.arm is not None else 0
    score_arm = 0 if arm < 0 else arm          # features relabelled: a* is feature 0
    if sampler not in ("float", "exact"):
        raise DpledgerError(f"sampler must be 'float' or 'exact', got {sampler!r}")
    bits = 0
    env0, env1 = pair.envs()
    if sampler == "exact":
        from dpledger.mechanisms.noise import LATTICE_BITS
        from dpledger.policies.registry import exact_sampler_policies
        if not policy.exact_sampler:
            raise DpledgerError(f"policy {policy.name!r} has no exact-sampler form; the exact "
                                f"sampler runs {', '.join(exact_sampler_policies())}")
        bits = LATTICE_BITS
        env0, env1 = env0.with_lattice(bits), env1.with_lattice(bits)
    from dpledger.policies.simulator import run_certificate
    cert = certificate_summary(run_certificate(policy, T, K, bits))
    if bits and cert.get("pure_epsilon") is None and cert.get("gdp_mu") is None:
        # the exact Gaussian forms are certified in zCDP only (discrete Gaussian): no audit
        # currency (pure ε, GDP μ) states their certificate
        raise DpledgerError(f"policy {policy.name!r}: its exact-sampler form is certified in "
                            "zCDP only (discrete Gaussian); audits compare against a pure-ε or "
                            "GDP-μ certificate — audit its float form")
    currency = currency_of(cert)
    total = 2 * trials
    done = [0]

    def tick(m: int) -> None:
        done[0] += m
        if progress is not None:
            progress(done[0], total)

    notes = list(pair.notes)
    name = getattr(policy, "name", "")
    if whitebox_score not in ("auto", "released"):
        raise DpledgerError(f"whitebox_score must be 'auto' or 'released', got {whitebox_score!r}")
    lr = LR_CAPTURE.get(name) if (mode == "whitebox" and sampler == "float"
                                  and whitebox_score == "auto") else None
    delta_pair = float(hi - lo) if pair is None else float(pair.hi - pair.lo)
    sequential = until_ratio is not None or max_trials is not None or betting
    if claim is not None and not betting:
        raise DpledgerError("claim applies to the betting sequential audit (--sequential)")
    t0 = time.perf_counter()
    if mode == "whitebox":
        if lr == "gaussian-posterior":
            # every read after t* contains the witness: the score reads up to T (or stop_at)
            stop = _checked_stop(T if stop_at is None else stop_at, t_star + 1, T)
        elif lr == "laplace-releases":
            stop = _lr_stop(policy, env0, env1, T, t_star, arm, seed, stop_at, delta_pair)
        elif lr == "gaussian-releases":
            # the witness model's reads end by the policy's stated last round (DP-TS-UCB: its
            # budget φ after round K), else T
            last = getattr(policy, "witness_last_round", None)
            stop = _checked_stop(stop_at if stop_at is not None else (
                last(T, K) if last is not None else T), t_star + 1, T)
        else:
            stop = _whitebox_stop(policy, env0, env1, T, t_star, arm, seed, stop_at, workers)
    else:
        stop = _checked_stop(stop_at if stop_at is not None else (pair.stop_hint or T), t_star, T)

    def draw(side: int, start: int, n: int) -> dict:
        env = env0 if side == 0 else env1
        f = run_trials(policy, env, T, n, seed=seed, side=side, stop=stop,
                       capture=mode == "whitebox", arm=arm, t_star=t_star, workers=workers,
                       progress=tick, start=start, lr=lr, delta=delta_pair)
        if mode == "whitebox" and np.isnan(f["released"]).any():
            raise _Missing(int(np.isnan(f["released"]).sum()))
        return f

    info: dict = {}
    score_used = ("likelihood-ratio" if lr else "released") if mode == "whitebox" else score
    m0, _ = split_sizes(trials, selection_fraction)
    delta_audit = GDP_DELTA if currency == "mu" else 0.0
    if betting:
        from dpledger.audits.betting import betting_audit
        from dpledger.audits.stats import sequential_target
        target, mx = sequential_target(cert, currency, until_ratio, max_trials, trials)
        # a GDP certificate is tested in μ (mixture e-process over an ε grid), a pure-ε one
        # in ε; the claim is in the certificate's currency
        cert_key = "gdp_mu" if currency == "mu" else "pure_epsilon"
        if claim is None and cert.get(cert_key) is None:
            raise DpledgerError(f"{name}: an unbounded certificate and no claim: the betting "
                                "audit has nothing to test (give a claim)")
        claim_used = float(claim if claim is not None else cert[cert_key])
        total = 2 * mx
        sample, scorer = _sequential_sampler(mode, draw, info, score_arm, score)
        try:
            bet = betting_audit(sample, first=trials, max_trials=mx, claim=claim_used,
                                target=target, confidence=confidence,
                                selection_fraction=selection_fraction, scorer=scorer,
                                currency=currency)
        except _Missing as exc:
            raise _missing_error(exc, stop) from None
        sa = bet.final
        trials_done = bet.trials
        info["sequential"] = bet.to_json()
        info["claim"] = {"value": claim_used, "currency": currency,
                         "contradicted": bet.stop_reason == "contradicted"}
        info["ceiling"] = None
    elif sequential:
        from dpledger.audits.stats import sequential_audit
        from dpledger.audits.stats import sequential_target
        target, mx = sequential_target(cert, currency, until_ratio, max_trials, trials)
        total = 2 * mx
        sample, scorer = _sequential_sampler(mode, draw, info, score_arm, score)
        try:
            seq = sequential_audit(sample, first=trials, max_trials=mx, target=target,
                                   confidence=confidence, selection_fraction=selection_fraction,
                                   delta=delta_audit, currency=currency, scorer=scorer)
        except _Missing as exc:
            raise _missing_error(exc, stop) from None
        sa = seq.final
        trials_done = seq.trials
        info["sequential"] = seq.to_json()
        info["ceiling"] = ceiling(trials_done, confidence=confidence,
                                  selection_fraction=selection_fraction, currency=currency,
                                  delta=delta_audit, alpha_divisor=len(seq.checkpoints))
    else:
        while True:
            try:
                f0, f1 = draw(0, 0, trials), draw(1, 0, trials)
                break
            except _Missing as exc:
                # the witness release comes later in some runs: rerun the same trials (same
                # seeds) with twice the rounds; every trial is kept, none is dropped (dropping
                # would condition on an event that may depend on the data)
                if stop_at is not None or stop >= T:
                    raise DpledgerError(f"{counted(exc.args[0], 'trial')} made no witness "
                                        "release within "
                                        f"{stop} rounds" + ("; pass a larger stop_at"
                                                            if stop < T else "")) from None
                notes.append(f"some trials had not made the witness release by round {stop}; "
                             f"all trials rerun to round {min(T, 2 * stop)}")
                total += 2 * trials
                stop = min(T, 2 * stop)
        if mode == "whitebox":
            s0, s1 = f0["released"], f1["released"]
            if not lr:
                clean0, clean1 = np.unique(f0["clean"]), np.unique(f1["clean"])
                info["clean"] = {"D": _few(clean0), "D_prime": _few(clean1)}
                if clean0.size == 1 and clean1.size == 1 and clean0[0] == clean1[0]:
                    notes.append("the witness release's clean value is the same on D and D′: the "
                                 "pair does not touch the captured release")
        else:
            s0, s1, info = blackbox_scores(f0, f1, score_arm, m0, m0, score)
        sa = audit_scores(s0, s1, confidence=confidence, selection_fraction=selection_fraction,
                          delta=delta_audit, currency=currency)
        trials_done = trials
        info["ceiling"] = ceiling(trials, confidence=confidence,
                                  selection_fraction=selection_fraction, currency=currency,
                                  delta=delta_audit)
        if lr:
            bp = _best_possible(policy, T, K, trials, confidence, selection_fraction, cert,
                                currency)
            if bp is not None:
                info["best_possible"] = bp
    elapsed = time.perf_counter() - t0
    if mode == "whitebox":
        info["whitebox_capture"] = WHITEBOX_CAPTURE[lr or "single"]
        if lr in ("laplace-releases", "gaussian-releases") and not sequential:
            info["witness_releases_mean"] = [float(np.mean(f0["clean"])), float(np.mean(f1["clean"]))]
    extra = {"policy": {"name": getattr(policy, "name", type(policy).__name__),
                        "params": _jsonable(policy.recorded_params()
                                            if hasattr(policy, "recorded_params")
                                            else policy.params)},
             "horizon": int(T), "arms": int(K), "stop_at": int(stop), "seed": int(seed),
             "score": score_used, "notes": notes}
    if sampler == "exact":
        extra["sampler"] = "exact"
    extra.update(info)
    res = AuditResult(score_audit=sa, certificate=cert, pair=pair.to_json(), trials=trials_done,
                      mode=mode, extra=extra,
                      plot_data=None if betting else plot_data_sequential(seq) if sequential
                      else plot_data_fixed(s0, s1, sa, trials, currency))
    res.elapsed = elapsed            # not written to JSON (reproducible bytes)
    res.certificate_object = run_certificate(policy, T, K, bits)   # in memory only (curves)
    return res


def _missing_error(exc: _Missing, stop: int) -> DpledgerError:
    """A sequential audit's trials that made no witness release within ``stop`` rounds."""
    return DpledgerError(f"{counted(exc.args[0], 'trial')} made no witness release within "
                         f"{stop} rounds; pass a larger stop_at")


def _sequential_sampler(mode: str, draw, info: dict, score_arm: int, score: str):
    """(sample, scorer) of a sequential audit: white-box, the captured score of each trial;
    black-box, the raw features and a scorer fitted once on the selection trials (its weights
    go to ``info``)."""
    if mode == "whitebox":
        return (lambda side, start, n: draw(side, start, n)["released"]), None

    def scorer(sel0, sel1):
        m = len(sel0["next"])
        _, _, fit = blackbox_scores(sel0, sel1, score_arm, m, m, score)
        info.update(fit)
        w = np.asarray(fit.get("fitted_weights", []), dtype=np.float64)

        def to_scores(f):
            out, _, _ = blackbox_scores(f, f, score_arm, 0, 0, score, weights=w)
            return out
        return to_scores
    return draw, scorer


def _best_possible(policy, T, K, trials, confidence, selection_fraction, cert, currency):
    """The best bound a likelihood-ratio threshold test could reach on ``trials`` per side for
    the certificate's worst candidate (:func:`dpledger.audits.optimal.best_possible`), with its
    ratio to the certificate: tells a composition-limited ratio from a policy-limited one."""
    certified = cert.get("pure_epsilon") if currency == "epsilon" else cert.get("gdp_mu")
    return best_possible_for(policy.certificate(T, K), trials, confidence, selection_fraction,
                             currency, certified)


def best_possible_for(certificate, trials, confidence, selection_fraction, currency,
                      certified) -> dict | None:
    """:func:`dpledger.audits.optimal.best_possible` of a certificate's worst candidate, in the
    audit's ``currency`` (None otherwise), with its ratio to ``certified``."""
    from dpledger.audits.optimal import best_possible
    from dpledger.audits.pairs import worst_candidate
    cand = worst_candidate(certificate)
    if cand is None:
        return None
    bp = best_possible(cand.composition, trials, confidence=confidence,
                       selection_fraction=selection_fraction)
    if bp is None or bp["currency"] != currency:
        return None
    if certified:
        bp["ratio"] = bp["value"] / float(certified)
    return bp


def _checked_stop(stop, first: int, T: int) -> int:
    """``stop`` as an int in [first, T], else the one error every audit mode gives."""
    stop = int(stop)
    if not first <= stop <= T:
        raise DpledgerError(f"stop_at must lie in [{first}, {T}], got {stop}")
    return stop


def _lr_stop(policy, env0, env1, T, t_star, arm, seed, stop_at, delta) -> int:
    """The last round the LR score reads: ``stop_at`` if given, else the latest round at which
    64 pilot trials per side (a separate seed stream, sides 2 and 3) made a release containing
    the witness, plus a quarter, capped at T.  Trials that would read later are scored on what
    they released by then: any stop gives a valid audit, a later one only more power."""
    if stop_at is not None:
        return _checked_stop(stop_at, t_star, T)
    last = t_star
    for side, env in ((2, env0), (3, env1)):
        f = run_trials(policy, env, T, 64, seed=seed, side=side, stop=T, capture=True, arm=arm,
                       t_star=t_star, lr="laplace-releases", delta=delta)
        last = max(last, int(f["last"].max()))
    return min(T, int(math.ceil(1.25 * last)))


def _whitebox_stop(policy, env0, env1, T, t_star, arm, seed, stop_at, workers) -> int:
    """The witness release's round: ``stop_at`` if given, else the smallest of t*, 2t*, 4t*, …, T
    at which 16 pilot trials per side (a separate seed stream) all captured it."""
    if stop_at is not None:
        return _checked_stop(stop_at, t_star, T)
    stop = t_star
    while True:
        ok = True
        for side, env in ((2, env0), (3, env1)):
            f = run_trials(policy, env, T, 16, seed=seed, side=side, stop=stop, capture=True,
                           arm=arm, t_star=t_star)
            if np.isnan(f["released"]).any():
                ok = False
                break
        if ok:
            return stop
        if stop >= T:
            raise DpledgerError(f"policy {getattr(policy, 'name', policy)!r} made no noisy "
                                f"release of the witness arm within T = {T} rounds on this "
                                "pair; a longer horizon gives it time")
        stop = min(T, 2 * stop)


def _few(values: np.ndarray):
    vals = [float(v) for v in values[:5]]
    return vals if values.size > 1 else (vals[0] if vals else None)


def _jsonable(params: dict) -> dict:
    out = {}
    for k, v in params.items():
        if isinstance(v, (bool, int, str)) or v is None:
            out[k] = v
        elif isinstance(v, float):
            out[k] = v if math.isfinite(v) else None
        else:
            out[k] = repr(v)
    return out


__all__ = ["audit_policy", "run_trials", "windows", "blackbox_scores", "fisher_weights",
           "gaussian_release_llr", "SCORES", "CHUNK"]
