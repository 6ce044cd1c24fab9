"""White-box audits of single mechanisms, and the floating-point attack (Mironov 2012).

The neighbouring pair of a mechanism is a statistic of sensitivity Δ whose clean value is 0 on D
and Δ on D′; the auditor sees the noisy output.  All noise of a side is drawn at once from the
Generator ``PCG64(SeedSequence(seed, spawn_key=(side,)))``.

* :func:`audit_laplace` — Laplace noise from :mod:`dpledger.mechanisms` samplers (``float``:
  ``FloatSampler``, numpy's inverse-CDF sampler; ``exact``: ``ExactSampler``, CKS20 discrete
  Laplace on the lattice 2^-k).  Certificate: the release the sampler records (``LaplaceRelease``
  or ``DiscreteLaplaceRelease``) — or a ``claimed`` ε, to audit a mechanism whose noise does not
  match its claim.
* :func:`audit_gaussian` — Gaussian noise; audited in μ.
* **Floating-point attack** (Mironov 2012, "On significance of the least significant bits for
  differential privacy", CCS 2012).  numpy's ``Generator.laplace`` returns ``loc + b·log(2U)`` (U <
  ½) or ``loc − b·log(2 − U − U)`` with U = j·2⁻⁵³, so the doubles it can output depend on ``loc``
  (``2 − U − U`` is itself rounded: 2 − U lands on the 2⁻⁵² grid).  :func:`unreachable` decides, by
  enumerating the few (w, U) that could produce y, whether a double y can be output at location
  ``loc``.  The event S = {y unreachable at loc = Δ} has probability 0 on D′ and about 0.8 on D, so
  the ε lower bound grows like log n instead of levelling off at ε: an infinite privacy loss.  The
  score is the indicator of S (:func:`float_attack_score`), audited with the same selection split
  and Clopper–Pearson bounds as any other score.  The event is valid for any sampler (it is a fixed
  function of the output); it only has power against samplers with input-dependent porosity. Exact
  outputs (lattice values) are equally "unreachable" on both sides, so the exact sampler is not
  flagged.

The enumeration replays numpy's arithmetic with Python's ``math.log`` (libm, as numpy's C code
uses); :func:`self_check` verifies on fresh draws that every output is reachable at its own
location, so a platform whose ``log`` differs shows up as a failed check, not as a silent miss.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from dpledger.audits.result import AuditResult, GDP_DELTA, composition_summary, currency_of
from dpledger.audits.stats import DEFAULT_CONFIDENCE, DEFAULT_SELECTION_FRACTION, audit_scores
from dpledger.audits.vector_releases import VECTOR_KINDS, draw_bytes, vector_scores
from dpledger.errors import DpledgerError, check_count, check_positive

TWO52 = 2.0 ** 52
TWO53 = 2.0 ** 53


def side_generator(seed: int, side: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(
        np.random.SeedSequence(entropy=int(seed), spawn_key=(int(side),))))


# ---- samples -------------------------------------------------------------------------------

def laplace_outputs(n: int, loc: float, *, epsilon: float = 1.0, sensitivity: float = 1.0,
                    sampler: str = "float", rng: np.random.Generator, lattice_bits: int = 20,
                    scale: float | None = None):
    """(outputs, release): ``n`` draws of loc + Laplace noise calibrated to (Δ, ε) — or of the
    given ``scale`` — from the named :mod:`dpledger.mechanisms` sampler, and the release that
    sampler records.  Float outputs are ``loc + noise`` in float64, exactly the arithmetic of
    ``Generator.laplace(loc, b)``; exact outputs are decoded lattice values."""
    from dpledger.mechanisms import ExactSampler, FloatSampler
    if sampler == "float":
        s = FloatSampler(rng)
        rel = s.laplace_release(sensitivity, None if scale is not None else epsilon, scale=scale)
        return loc + s.laplace(rel.scale, n), rel
    if sampler == "exact":
        s = ExactSampler(rng, lattice_bits=lattice_bits)
        rel = s.laplace_release(sensitivity, None if scale is not None else epsilon, scale=scale)
        m = s.round_to_lattice(loc)
        z = s.laplace(rel.scale, n)
        return (int(m) + z).astype(np.float64) / float(s.unit), rel
    raise DpledgerError(f"sampler must be 'float' or 'exact', got {sampler!r}")


def gaussian_outputs(n: int, loc: float, *, sigma: float, rng: np.random.Generator):
    """``n`` draws of loc + N(0, σ²) from the float sampler."""
    from dpledger.mechanisms import FloatSampler
    return loc + FloatSampler(rng).gaussian(sigma, n)


# ---- mechanism audits --------------------------------------------------------------------------

def _mechanism_result(s0, s1, release, *, trials, confidence, selection_fraction, pair, extra,
                      certificate=None):
    from dpledger.accounting.composition import Composition
    cert = composition_summary(Composition.of([release])) if certificate is None else certificate
    currency = currency_of(cert)
    sa = audit_scores(s0, s1, confidence=confidence, selection_fraction=selection_fraction,
                      delta=GDP_DELTA if currency == "mu" else 0.0, currency=currency)
    return AuditResult(score_audit=sa, certificate=cert, pair=pair, trials=trials,
                       mode="mechanism", extra=extra)


def audit_laplace(epsilon: float = 1.0, trials: int = 100_000, *, sensitivity: float = 1.0,
                  sampler: str = "float", claimed: float | None = None, scale: float | None = None,
                  seed: int = 0, confidence: float = DEFAULT_CONFIDENCE,
                  selection_fraction: float = DEFAULT_SELECTION_FRACTION, lattice_bits: int = 20,
                  attack: bool = False) -> AuditResult:
    """White-box audit of the Laplace mechanism: clean value 0 on D, Δ on D′.

    ``scale`` overrides the noise scale actually drawn (e.g. half of Δ/ε, an under-noised
    mechanism); ``claimed`` is the ε certified (default ``epsilon``).  ``attack=True`` audits
    the floating-point event of Mironov (2012) instead of the raw value."""
    trials = check_count("trials", trials, minimum=2)
    epsilon = check_positive("epsilon", epsilon)
    rng0, rng1 = side_generator(seed, 0), side_generator(seed, 1)
    y0, rel = laplace_outputs(trials, 0.0, epsilon=epsilon, sensitivity=sensitivity,
                              sampler=sampler, rng=rng0, lattice_bits=lattice_bits, scale=scale)
    y1, _ = laplace_outputs(trials, sensitivity, epsilon=epsilon, sensitivity=sensitivity,
                            sampler=sampler, rng=rng1, lattice_bits=lattice_bits, scale=scale)
    cert = None
    if claimed is not None or scale is not None:
        from dpledger.accounting.composition import Composition
        from dpledger.accounting.releases import LaplaceRelease
        claim = epsilon if claimed is None else check_positive("claimed", claimed)
        cert = composition_summary(Composition.of([LaplaceRelease.from_epsilon(claim)]))
    extra = {"mechanism": {"kind": "laplace", "sampler": sampler, "sensitivity": sensitivity,
                           "noise": _release_json(rel), "seed": int(seed)}}
    if attack:
        if sampler == "float" and scale is None and not _power_of_two(sensitivity / epsilon):
            raise DpledgerError("the floating-point attack replays numpy's arithmetic for scales "
                                "that are powers of two only")
        b = sensitivity / epsilon if scale is None else scale
        s0 = float_attack_score(y0, loc=sensitivity, scale=b)
        s1 = float_attack_score(y1, loc=sensitivity, scale=b)
        extra["score"] = "mironov-unreachable"
    else:
        s0, s1 = y0, y1
        extra["score"] = "value"
    return _mechanism_result(s0, s1, rel, trials=trials, confidence=confidence,
                             selection_fraction=selection_fraction,
                             pair={"round": None, "from": 0.0, "to": float(sensitivity)},
                             extra=extra, certificate=cert)


def audit_gaussian(mu: float = 1.0, trials: int = 100_000, *, sigma: float = 1.0,
                   claimed_mu: float | None = None, seed: int = 0,
                   confidence: float = DEFAULT_CONFIDENCE,
                   selection_fraction: float = DEFAULT_SELECTION_FRACTION) -> AuditResult:
    """White-box audit of the Gaussian mechanism N(0, σ²) vs N(μσ, σ²) (shift/σ = μ), in μ."""
    from dpledger.accounting.releases import GaussianRelease
    trials = check_count("trials", trials, minimum=2)
    mu = check_positive("mu", mu)
    sigma = check_positive("sigma", sigma)
    shift = mu * sigma
    y0 = gaussian_outputs(trials, 0.0, sigma=sigma, rng=side_generator(seed, 0))
    y1 = gaussian_outputs(trials, shift, sigma=sigma, rng=side_generator(seed, 1))
    rel = GaussianRelease(sigma=sigma, sensitivity=shift)
    cert = None
    if claimed_mu is not None:
        from dpledger.accounting.composition import Composition
        cert = composition_summary(Composition.of([GaussianRelease.from_mu(
            check_positive("claimed_mu", claimed_mu))]))
    return _mechanism_result(y0, y1, rel, trials=trials, confidence=confidence,
                             selection_fraction=selection_fraction,
                             pair={"round": None, "from": 0.0, "to": shift},
                             extra={"mechanism": {"kind": "gaussian", "sampler": "float",
                                                  "sigma": sigma, "shift": shift,
                                                  "seed": int(seed)}, "score": "value"},
                             certificate=cert)


def _release_json(rel) -> dict:
    from dpledger.accounting.releases import release_to_json
    return release_to_json(rel)


def _power_of_two(x: float) -> bool:
    m, _ = math.frexp(x)
    return x > 0 and m == 0.5


# ---- the floating-point attack -----------------------------------------------------------------

def _log_image(v: float, grid: float) -> bool:
    """Is v = fl(log(k/grid)) for some integer k in [1, grid]?  log is expanding on (0, 1], so
    only k within a few units of e^v·grid can map to v."""
    if v > 0.0:
        return False
    k0 = int(round(math.exp(v) * grid))
    for k in range(max(1, k0 - 3), min(int(grid), k0 + 3) + 1):
        if math.log(k / grid) == v:
            return True
    return False


def _reachable_one(y: float, loc: float, scale: float) -> bool | None:
    """Can ``Generator.laplace(loc, scale)`` (scale a power of two) output the double y?
    None when y lies where the enumeration is not attempted (|y − loc| < |y|/2, many candidate w)."""
    d = y - loc
    if d == 0.0 or abs(d) < 0.5 * abs(y):
        return None
    w = d
    cands = [w]
    lo_w, hi_w = w, w
    for _ in range(6):
        lo_w = math.nextafter(lo_w, -math.inf)
        hi_w = math.nextafter(hi_w, math.inf)
        cands.extend((lo_w, hi_w))
    for w in cands:
        if w == 0.0 or loc + w != y:
            continue
        v = w / scale                      # exact: scale is a power of two
        # w < 0: y = loc + b·log(U + U), U + U = j·2⁻⁵² exactly;
        # w > 0: y = loc − b·log(2 − U − U), where 2 − U rounds to the 2⁻⁵² grid and the result
        # is some multiple of 2⁻⁵³ (every such multiple is treated as possible: a superset, so
        # the event never contains an output the sampler can produce at loc).
        if w < 0 and _log_image(v, TWO52) or w > 0 and _log_image(-v, TWO53):
            return True
    return False


def unreachable(y, loc: float, scale: float = 1.0) -> np.ndarray:
    """Boolean array: y certainly cannot be output by ``Generator.laplace(loc, scale)``.
    Outputs outside the enumerated region count as reachable (not in the event)."""
    y = np.asarray(y, dtype=np.float64).ravel()
    out = np.zeros(y.size, dtype=bool)
    for i, v in enumerate(y.tolist()):
        r = _reachable_one(v, float(loc), float(scale))
        out[i] = r is False
    return out


def float_attack_score(y, loc: float, scale: float = 1.0) -> np.ndarray:
    """1.0 where y is unreachable at location ``loc`` (Mironov's event), else 0.0."""
    return unreachable(y, loc, scale).astype(np.float64)


def self_check(n: int = 2000, seed: int = 12345, scale: float = 1.0) -> dict:
    """Replay check: fresh draws of ``Generator.laplace(loc, scale)`` at loc 0 and loc 1 must all
    be reachable at their own location.  Returns counts; ``ok`` is False when the replay of
    numpy's arithmetic does not match this platform."""
    rng = np.random.default_rng(seed)
    bad = {}
    for loc in (0.0, 1.0):
        y = loc + rng.laplace(0.0, scale, n)
        bad[loc] = int(unreachable(y, loc, scale).sum())
    return {"n": n, "unreachable_at_own_loc": bad, "ok": all(v == 0 for v in bad.values())}


__all__ = ["audit_laplace", "audit_gaussian", "laplace_outputs", "gaussian_outputs",
           "unreachable", "float_attack_score", "self_check", "side_generator"]


# ---- any release spec: the likelihood-ratio score of the whole composition ---------------------

MAX_SPEC_RELEASES = 10_000
SPEC_CHUNK = 16_384


def spec_items(specs) -> tuple[object, list]:
    """(composition, [(release, count), …]) of CLI release specs (``compose``'s parser), after
    checking that every release has a sampler here and that the total count is at most
    :data:`MAX_SPEC_RELEASES` (a mechanism audit draws every release of every trial)."""
    from dpledger.accounting.composition import Composition
    from dpledger.accounting.releases import parse_release_spec
    if isinstance(specs, str):
        specs = [specs]
    if not specs:
        raise DpledgerError("no release to audit")
    pairs = [parse_release_spec(s) for s in specs]
    comp = Composition.of(pairs)
    items = list(comp.items)
    if any(r.kind in VECTOR_KINDS or r.kind == "wishart" for r, _ in pairs):
        # drawn as released (every entry, from the policies' compiled samplers), not as the
        # scalar normal form the composition keeps
        items = _drawn_items(pairs)
    total = sum(c for _, c in items)
    if total > MAX_SPEC_RELEASES:
        raise DpledgerError(f"a mechanism audit draws every release: {total} releases exceed the "
                            f"limit {MAX_SPEC_RELEASES}")
    return comp, items


def _drawn_items(pairs) -> list:
    """(release, count) as drawn: vector, matrix and Wishart releases as parsed, the others as
    the composition's representative of their normal form, equal ones merged in order."""
    from dpledger.accounting.composition import canonical
    merged: dict = {}
    for rel, count in pairs:
        key = rel if rel.kind in VECTOR_KINDS or rel.kind == "wishart" else canonical(rel)
        merged[key] = merged.get(key, 0) + int(count)
    return list(merged.items())


def _release_llr(release, clean: float, rng: np.random.Generator, n: int) -> np.ndarray:
    """n draws of ``release`` at clean value ``clean`` (0 on D, Δ on D′), each reduced to its
    log-likelihood ratio log p_D′(y)/p_D(y) — the Neyman–Pearson statistic of one release:

    * laplace (b, Δ): y = clean + Lap(b); LLR = (|y| − |y − Δ|)/b = clip(2y − Δ, −Δ, Δ)/b;
    * discrete_laplace (t, Δ): y = clean + G₁ − G₂, G geometric with p = 1 − e^{−1/t} (so
      P(y − clean = z) ∝ e^{−|z|/t}); LLR = (|y| − |y − Δ|)/t;
    * gaussian (σ, Δ): y = clean + N(0, σ²); LLR = (yΔ − Δ²/2)/σ²;
    * discrete_gaussian (σ, Δ): y = clean + Z, P(Z = z) ∝ e^{−z²/2σ²} on |z| ≤ ⌈40σ⌉ + 1 (the mass
      beyond is below e^{−800}); LLR = (yΔ − Δ²/2)/σ²;
    * pure (ε): binary randomized response, the worst case the accounting assumes: y = 1 with
      probability e^ε/(1 + e^ε) on D′ and 1/(1 + e^ε) on D; LLR = ε(2y − 1);
    * non_private: y = clean; the score is y itself (D and D′ are told apart with certainty);
    * laplace_vector, gaussian_vector, gaussian_sym_matrix: every entry drawn by the policies'
      compiled sampler, the worst-case change of :mod:`dpledger.audits.vector_releases`, the
      LLR of the whole vector (:func:`~dpledger.audits.vector_releases.vector_scores`);
    * wishart: Y = clean·v vᵀ + W, scored by q = 1/(vᵀY⁻¹v) (audited alone, :func:`_audit_wishart`)."""
    kind = release.kind
    if kind in VECTOR_KINDS or kind == "wishart":
        return vector_scores(release, int(clean), rng, n)
    if kind == "laplace":
        d, b = float(release.sensitivity), float(release.scale)
        y = clean * d + rng.laplace(0.0, b, n)
        # |y| − |y − Δ| = clip(2y − Δ, −Δ, Δ), written as the clip so that the atoms ±Δ/b are
        # exact: the difference of absolute values rounds differently for y = z (D) and
        # y = Δ + z (D′), a floating-point artefact the selection would otherwise exploit
        return np.clip(2.0 * y - d, -d, d) / b
    if kind == "discrete_laplace":
        d, t = int(release.sensitivity), float(release.scale)
        p = -math.expm1(-1.0 / t)
        z = rng.geometric(p, n) - rng.geometric(p, n)
        y = (clean * d + z).astype(np.float64)
        return np.clip(2.0 * y - d, -d, d) / t
    if kind in ("gaussian", "discrete_gaussian") and not (
            float(release.sensitivity) / float(release.sigma) < 1e154):
        raise DpledgerError(f"{kind} release with μ = Δ/σ = "
                            f"{float(release.sensitivity) / float(release.sigma):.3g}: its "
                            "log-likelihood ratio overflows float64 (μ ≥ 1e154); no audit "
                            "can score it")
    if kind == "gaussian":
        d, s = float(release.sensitivity), float(release.sigma)
        y = clean * d + rng.normal(0.0, s, n)
        return (y * d - 0.5 * d * d) / (s * s)
    if kind == "discrete_gaussian":
        d, s = int(release.sensitivity), float(release.sigma)
        m = int(math.ceil(40.0 * s)) + 1
        support = np.arange(-m, m + 1)
        w = np.exp(-(support.astype(np.float64) ** 2) / (2.0 * s * s))
        z = rng.choice(support, size=n, p=w / w.sum())
        y = (clean * d + z).astype(np.float64)
        return (y * d - 0.5 * d * d) / (s * s)
    if kind == "pure":
        e = float(release.epsilon)
        # randomized response: P(y = 1) = e^ε/(1 + e^ε) on D′ (clean 1), 1/(1 + e^ε) on D;
        # the logistic function, which cannot overflow for large ε
        from scipy.special import expit
        p1 = float(expit(e if clean else -e))
        y = (rng.random(n) < p1).astype(np.float64)
        return e * (2.0 * y - 1.0)
    if kind == "non_private":
        return np.full(n, float(clean))
    raise DpledgerError(f"no sampler for release kind {kind!r}")


def entries_per_trial(items) -> int:
    """Noise entries one trial of one side draws: Σ count × the entries of each release (a
    vector's or matrix's every entry, a Wishart's (p+1)-square packed draw; 1 for a scalar)."""
    from dpledger.audits.vector_releases import layout
    total = 0
    for rel, count in items:
        if rel.kind in VECTOR_KINDS or rel.kind == "wishart":
            blocks, E, _ = layout(rel)
            total += int(count) * blocks * E
        else:
            total += int(count)
    return max(1, total)


def spec_chunk(items) -> int:
    """Trials drawn together: :data:`SPEC_CHUNK`, or fewer when a trial draws many entries —
    at most :data:`~dpledger.audits.vector_releases.BATCH_FLOATS` entries a chunk, so that an
    audit of 1000 trials of a 3000-square matrix draws 1000 trials, not a whole chunk of
    16 384 (16× the work asked for, issue 34 §3).  A function of the releases only, so a
    trial's draws still depend on (seed, side, i) alone."""
    from dpledger.audits.vector_releases import BATCH_FLOATS
    return max(1, min(SPEC_CHUNK, BATCH_FLOATS // entries_per_trial(items)))


def spec_sampler(items, seed: int, tick: Callable[[int], None] | None = None):
    """``sample(side, start, n)``: the LLR scores of trials start … start + n − 1 of side 0 (every
    clean value 0) or 1 (every clean value Δ).  Trial i belongs to chunk i // C
    (C = :func:`spec_chunk`), drawn from ``PCG64(SeedSequence(seed, spawn_key=(side, chunk)))``
    release by release in the composition's order, so a trial's score depends on (seed, side,
    i) only, not on batching.  ``tick(k)``: told the noise entries of every chunk drawn (the
    audit's progress); Ctrl-C is heard between chunks (Python code)."""
    cache: dict = {}
    C = spec_chunk(items)
    per_trial = entries_per_trial(items)

    def chunk(side: int, c: int) -> np.ndarray:
        key = (side, c)
        if key not in cache:
            rng = np.random.Generator(np.random.PCG64(
                np.random.SeedSequence(entropy=int(seed), spawn_key=(int(side), int(c)))))
            s = np.zeros(C)
            for rel, count in items:
                for _ in range(int(count)):
                    s += _release_llr(rel, float(side), rng, C)
            cache.clear()
            cache[key] = s
            if tick is not None:
                tick(C * per_trial)
        return cache[key]

    def sample(side: int, start: int, n: int) -> np.ndarray:
        out = np.empty(n)
        i = 0
        while i < n:
            g = start + i
            c, off = divmod(g, C)
            m = min(n - i, C - off)
            out[i:i + m] = chunk(side, c)[off:off + m]
            i += m
        return out

    return sample


_SPEC_TRIAL_BYTES = 64         # per trial of both sides: the two scores, the selection's sorted
                               # copies, the event's masks and the plot's data (measured peak
                               # RSS: 38 B at 5e6 trials, 50 B with --plot)
_SPEC_SLACK = 256 << 20        # interpreter, numpy, scipy


def _release_draw_bytes(release) -> int:
    """Bytes per trial the draws of one release hold (the noise, the clean shift, its LLR),
    plus, for a discrete Gaussian, its support and weights (⌈40σ⌉ + 1 points each side)."""
    per = 4 * 8
    if release.kind in VECTOR_KINDS or release.kind == "wishart":
        return draw_bytes(release)
    if release.kind == "discrete_gaussian":
        m = int(math.ceil(40.0 * float(release.sigma))) + 1 if math.isfinite(
            float(release.sigma)) else 1 << 62
        return per, 4 * 8 * (2 * m + 1)
    return per, 0


def memory_estimate(items, trials: int, sequential: bool = False) -> dict:
    """Bytes :func:`audit_spec` holds at its peak, before any draw: every trial of both sides
    (:data:`_SPEC_TRIAL_BYTES`; a sequential audit holds its first batch and one later batch of
    at most :data:`~dpledger.audits.stats.SEQUENTIAL_BATCH`), and one chunk of
    :func:`spec_chunk` trials being drawn (its per-release temporaries and the largest fixed
    table, a discrete Gaussian's support)."""
    from dpledger.audits.stats import SEQUENTIAL_BATCH
    held = int(trials) + (min(SEQUENTIAL_BATCH, 100 * int(trials)) if sequential else 0)
    draws = [_release_draw_bytes(r) for r, _ in items]
    chunk = spec_chunk(items) * (8 + max(p for p, _ in draws)) + max(f for _, f in draws)
    return {"bytes": _SPEC_SLACK + chunk + _SPEC_TRIAL_BYTES * held,
            "per_trial": _SPEC_TRIAL_BYTES, "fixed": _SPEC_SLACK + chunk, "held_trials": held}


def check_memory(items, trials: int, sequential: bool = False) -> dict:
    """:func:`memory_estimate`, refused with the estimate and what would fit."""
    from dpledger.resources import available_memory, check_fits, fmt_bytes, largest_fitting
    est = memory_estimate(items, trials, sequential)
    avail = available_memory()
    if avail is not None and est["fixed"] > avail:
        fix = (f"a release's draws alone need {fmt_bytes(est['fixed'])} (a discrete Gaussian "
               "holds its whole support, ⌈40σ⌉ points each side): audit a smaller σ")
    else:
        fits = largest_fitting(est["per_trial"], est["fixed"], avail)
        fix = (f"use fewer --trials (each trial of both sides keeps about "
               f"{est['per_trial']} B; at most {fits} fit"
               + (", first batch included" if sequential else "") + ")")
    check_fits("this audit", est["bytes"], fix, avail)
    return est


def audit_spec(specs, trials: int = 100_000, *, seed: int = 0,
               confidence: float = DEFAULT_CONFIDENCE,
               selection_fraction: float = DEFAULT_SELECTION_FRACTION,
               until_ratio: float | None = None, max_trials: int | None = None,
               progress: Callable[[int, int], None] | None = None) -> AuditResult:
    """White-box audit of the composition of CLI release specs (``laplace:eps=1``,
    ``gaussian:mu=0.5``, ``laplace:scale=2,count=3`` …), as ``compose`` accepts them.

    Pair: every release's clean statistic is 0 on D and its sensitivity Δ on D′ (the worst case
    of every release at once).  Score: the sum of per-release log-likelihood ratios
    (:func:`_release_llr`), the Neyman–Pearson optimal statistic of the whole output vector.
    Certificate: the composition's (as ``compose`` reports it).  With ``until_ratio`` R the
    audit is sequential (:func:`~dpledger.audits.stats.sequential_audit`): batches from
    ``trials`` per side, doubling, until ε_lower (or μ_lower) ≥ R × certificate, or it cannot,
    or ``max_trials``.  ``progress(done, total)``: the noise entries drawn and to draw (a
    sequential audit's total: at its largest, ``max_trials``)."""
    from dpledger.audits.stats import sequential_audit, ceiling
    trials = check_count("trials", trials, minimum=2)
    seed = check_count("seed", seed, minimum=0)
    comp, items = spec_items(specs)
    check_memory(items, trials, sequential=until_ratio is not None or max_trials is not None)
    tick = _ticker(progress, items, max(trials, max_trials or 0))
    if any(r.kind == "wishart" for r, _ in items):
        return _audit_wishart(items, trials, seed=seed, confidence=confidence,
                              selection_fraction=selection_fraction,
                              sequential=until_ratio is not None or max_trials is not None,
                              tick=tick)
    cert = composition_summary(comp)
    currency = currency_of(cert)
    delta = GDP_DELTA if currency == "mu" else 0.0
    sample = spec_sampler(items, seed, tick)
    extra = {"mechanism": {"kind": "composition",
                           "releases": [{"release": _release_json(r), "count": int(c)}
                                        for r, c in items], "seed": int(seed)},
             "score": "log-likelihood ratio (sum over releases)"}
    pair = {"round": None, "from": 0.0, "to": "sensitivity of each release"}
    if until_ratio is None and max_trials is None:
        from dpledger.audits.result import plot_data_fixed
        s0, s1 = sample(0, 0, trials), sample(1, 0, trials)
        sa = audit_scores(s0, s1, confidence=confidence,
                          selection_fraction=selection_fraction, delta=delta, currency=currency)
        extra["ceiling"] = ceiling(trials, confidence=confidence,
                                   selection_fraction=selection_fraction, currency=currency,
                                   delta=delta)
        return AuditResult(score_audit=sa, certificate=cert, pair=pair, trials=trials,
                           mode="mechanism", extra=extra,
                           plot_data=plot_data_fixed(s0, s1, sa, trials, currency))
    from dpledger.audits.stats import sequential_target
    target, mx = sequential_target(cert, currency, until_ratio, max_trials, trials)
    seq = sequential_audit(sample, first=trials, max_trials=mx, target=target,
                           confidence=confidence, selection_fraction=selection_fraction,
                           delta=delta, currency=currency)
    extra["sequential"] = seq.to_json()
    extra["ceiling"] = ceiling(seq.trials, confidence=confidence,
                               selection_fraction=selection_fraction, currency=currency,
                               delta=delta, alpha_divisor=len(seq.checkpoints))
    from dpledger.audits.result import plot_data_sequential
    return AuditResult(score_audit=seq.final, certificate=cert, pair=pair, trials=seq.trials,
                       mode="mechanism", extra=extra, plot_data=plot_data_sequential(seq))


def _ticker(progress, items, trials: int) -> Callable[[int], None] | None:
    """``tick(k)`` adding k drawn entries to ``progress(done, total)``, total the entries of
    ``trials`` trials of both sides, whole chunks."""
    if progress is None:
        return None
    C = spec_chunk(items)
    total = 2 * -(-int(trials) // C) * C * entries_per_trial(items)
    done = [0]

    def tick(k: int) -> None:
        done[0] += int(k)
        progress(min(done[0], total), total)
    return tick


def _audit_wishart(items, trials: int, *, seed: int, confidence: float,
                   selection_fraction: float, sequential: bool,
                   tick: Callable[[int], None] | None = None) -> AuditResult:
    """A Wishart release alone (its certificate is an (ε, δ) statement, which composes with
    nothing here): the pair of :mod:`dpledger.audits.vector_releases`, score q = 1/(vᵀY⁻¹v), the
    KOV bound at the release's δ against the theorem's ε; ``limit_reason`` gives the pair's
    exact ε at that δ (:func:`~dpledger.audits.vector_releases.wishart_pair_epsilon`)."""
    from dpledger.audits.stats import ceiling
    from dpledger.audits.vector_releases import wishart_limit_reason, wishart_pair_epsilon
    if len(items) != 1 or items[0][1] != 1:
        raise DpledgerError("a wishart release is audited alone (count 1): its certificate is "
                            "an (epsilon, delta) statement, audited at its own delta")
    if sequential:
        raise DpledgerError("a wishart audit is fixed-n: drop --until-ratio and --max-trials")
    rel = items[0][0]
    sample = spec_sampler(items, seed, tick)
    s0, s1 = sample(0, 0, trials), sample(1, 0, trials)
    delta = float(rel.delta)
    sa = audit_scores(s0, s1, confidence=confidence, selection_fraction=selection_fraction,
                      delta=delta, currency="epsilon")
    from dpledger.accounting.composition import Composition
    cert = composition_summary(Composition.of([rel]))
    cert["approx"] = {"epsilon": rel.epsilon, "delta": delta,
                      "basis": "Sheffet 2015's Wishart theorem, epsilon at its delta"}
    exact = wishart_pair_epsilon(rel)
    extra = {"mechanism": {"kind": "wishart", "release": _release_json(rel), "seed": int(seed)},
             "score": "q = 1/(v^T Y^-1 v) (a monotone function of the likelihood ratio)",
             "ceiling": ceiling(trials, confidence=confidence,
                                selection_fraction=selection_fraction, delta=delta),
             "pair_exact_epsilon": exact, "limit_reason": wishart_limit_reason(rel)}
    pair = {"round": None, "from": "0", "to": "v v^T, |v| = bound, v along (1, ..., 1)",
            "limit_reason": extra["limit_reason"]}
    return AuditResult(score_audit=sa, certificate=cert, pair=pair, trials=trials,
                       mode="mechanism", extra=extra)


__all__ += ["audit_spec", "spec_items", "spec_sampler", "spec_chunk", "entries_per_trial",
            "MAX_SPEC_RELEASES"]
