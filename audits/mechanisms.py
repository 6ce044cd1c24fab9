"""White-box audits of single mechanisms, and the floating-point attack (notes §4.2–§4.3, §7.4).

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
  differential privacy", CCS 2012; notes §4.3).  numpy's ``Generator.laplace`` returns
  ``loc + b·log(2U)`` (U < ½) or ``loc − b·log(2 − U − U)`` with U = j·2⁻⁵³, so the doubles it can
  output depend on ``loc`` (``2 − U − U`` is itself rounded: 2 − U lands on the 2⁻⁵² grid).  :func:`unreachable` decides, by enumerating the few (w, U) that could
  produce y, whether a double y can be output at location ``loc``.  The event
  S = {y unreachable at loc = Δ} has probability 0 on D′ and about 0.8 on D, so the ε lower bound
  grows like log n instead of levelling off at ε: an infinite privacy loss.  The score is the
  indicator of S (:func:`float_attack_score`), audited with the same selection split and
  Clopper–Pearson bounds as any other score.  The event is valid for any sampler (it is a fixed
  function of the output); it only has power against samplers with input-dependent porosity.
  Exact outputs (lattice values) are equally "unreachable" on both sides, so the exact sampler
  is not flagged.

The enumeration replays numpy's arithmetic with Python's ``math.log`` (libm, as numpy's C code
uses); :func:`self_check` verifies on fresh draws that every output is reachable at its own
location, so a platform whose ``log`` differs shows up as a failed check, not as a silent miss.
"""
from __future__ import annotations

import math

import numpy as np

from dpledger.audits.result import AuditResult, GDP_DELTA, composition_summary, currency_of
from dpledger.audits.stats import DEFAULT_CONFIDENCE, DEFAULT_SELECTION_FRACTION, audit_scores
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
