"""The privacy block: one JSON schema shared by ``compose --json`` and ``run.json``
(docs/design.md#interfaces-and-json).

A block describes a set of compositions (one, for ``compose``; a certificate's candidates; every
distinct per-reward composition of a ledger) by the pointwise maximum of each value:

``pure_epsilon``, ``gdp_mu``, ``zcdp_rho``   number or null, each with a ``*_status``;
``epsilon_at_delta``       {δ: ε} from the ``best`` accountant, ``epsilon_at_delta_source``
                           {δ: accountant};
``epsilon``                {accountant: {δ: ε or null}} for pure, gdp, rdp, pld, approx;
``epsilon_status``         {accountant: {δ: status}};
``composition``            one composition as [{release, count}], the largest by (pure ε, GDP μ²):
                           a witness for reading, never the source of the values above (each
                           is the maximum of its own; :func:`privacy_block_witnessed` names a
                           witness for every number).

Conventions: δ keys are ``repr(float(δ))`` and are read back with ``float()``; numbers are finite
or null, with a status in {ok, not_applicable, unbounded, skipped:<reason>}; keys in a fixed
order; written with ``allow_nan=False``.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from dpledger.accounting.accountants import ACCOUNTANTS, OK, BestAccountant
from dpledger.accounting.composition import Composition, maximal_compositions
from dpledger.accounting.pld import PldSkipped
from dpledger.errors import DpledgerError, check_delta

SCHEMA_VERSION = 1
DEFAULT_DELTAS = (1e-3, 1e-5, 1e-6, 1e-9)
ACCOUNTANT_ORDER = ("pure", "gdp", "rdp", "pld", "approx")


def delta_key(delta: float) -> str:
    return repr(float(delta))


def parse_deltas(deltas: Iterable[Any] | None) -> tuple[float, ...]:
    if deltas is None:
        return DEFAULT_DELTAS
    out = tuple(sorted({check_delta(float(d) if isinstance(d, str) else d) for d in deltas},
                       reverse=True))
    if not out:
        raise DpledgerError("at least one delta is needed")
    return out


def _finite(x: float | None) -> tuple[float | None, str]:
    if x is None:
        return None, "not_applicable"
    if math.isinf(x):
        return None, "unbounded"
    return float(x), OK


OVERFLOW = "skipped:overflow"


def _finite_in(x: float | None, comps: Sequence[Composition], currency: str) -> tuple[float | None, str]:
    """As :func:`_finite`, but an ∞ from compositions that are bounded in ``currency`` is an
    overflow of the float range (huge counts), reported as ``skipped:overflow``."""
    value, status = _finite(x)
    if status == "unbounded" and not any(c.status(currency) == "unbounded" for c in comps):
        return None, OVERFLOW
    return value, status


def _dedupe(compositions: Sequence[Composition]) -> list[Composition]:
    return maximal_compositions(compositions)


def privacy_block(compositions: Sequence[Composition], deltas: Sequence[float] = DEFAULT_DELTAS,
                  *, adaptive: bool = False, unbounded: bool = False) -> dict:
    """The privacy block of the pointwise maximum over ``compositions``."""
    return privacy_block_witnessed(compositions, deltas, adaptive=adaptive,
                                   unbounded=unbounded)[0]


def _argmax(values: Sequence[float]) -> int:
    return max(range(len(values)), key=lambda i: values[i])


def privacy_block_witnessed(compositions: Sequence[Composition],
                            deltas: Sequence[float] = DEFAULT_DELTAS, *, adaptive: bool = False,
                            unbounded: bool = False) -> tuple[dict, dict[str, int]]:
    """:func:`privacy_block` and, for each number it reports, a witness: the index into
    ``compositions`` of one composition attaining that maximum.  Keys ``pure_epsilon``,
    ``gdp_mu``, ``zcdp_rho``, ``epsilon.<accountant>.<δ>``, ``epsilon_at_delta.<δ>``; a number
    that is not finite (or a block of one composition) names the first composition that
    attains it.  Each number is the maximum of its own values: the witnesses of two numbers
    may differ (issue 26 §1), and none of them is the source of the others' values."""
    deltas = parse_deltas(deltas)
    given = list(compositions)
    comps = _dedupe(given)
    if unbounded or not comps:
        block = _unbounded_block(deltas) if unbounded else privacy_block([Composition()], deltas)
        return block, {}
    first: dict[Composition, int] = {}
    for i, c in enumerate(given):
        first.setdefault(c, i)
    idx = [first[c] for c in comps]
    wit: dict[str, int] = {}
    out: dict[str, Any] = {}
    pure = [c.pure_epsilon() for c in comps]
    wit["pure_epsilon"] = idx[_argmax(pure)]
    out["pure_epsilon"], out["pure_epsilon_status"] = _finite_in(max(pure), comps, "pure")
    if out["pure_epsilon"] is None and any(c.status("pure") == "not_applicable" for c in comps) \
            and not any(c.status("pure") == "unbounded" for c in comps):
        out["pure_epsilon_status"] = "not_applicable"      # an RDP / zCDP release: unknown
    mus = [c.gdp_mu() for c in comps]
    if any(c.status("gdp") == "unbounded" for c in comps):
        out["gdp_mu"], out["gdp_mu_status"] = None, "unbounded"
        wit["gdp_mu"] = idx[next(i for i, c in enumerate(comps) if c.status("gdp") == "unbounded")]
    elif any(m is None for m in mus):
        out["gdp_mu"], out["gdp_mu_status"] = None, "not_applicable"
    else:
        out["gdp_mu"], out["gdp_mu_status"] = _finite_in(float(max(mus)), comps, "gdp")
        wit["gdp_mu"] = idx[_argmax(mus)]
    rhos = [c.zcdp_rho() for c in comps]
    out["zcdp_rho"], out["zcdp_rho_status"] = _finite_in(max(rhos), comps, "zcdp")
    wit["zcdp_rho"] = idx[_argmax(rhos)]
    if any(c.status("zcdp") == "not_applicable" for c in comps):
        out["zcdp_rho"], out["zcdp_rho_status"] = None, "not_applicable"
        del wit["zcdp_rho"]

    best = BestAccountant()
    eps_best: dict[str, float | None] = {}
    src: dict[str, str] = {}
    for d in deltas:
        vals = [best.epsilon_and_source(c, d, adaptive) if best.supports(c, adaptive) == OK
                else (math.inf, "none") for c in comps]
        i = _argmax([v[0] for v in vals])
        value, source = vals[i]
        wit[f"epsilon_at_delta.{delta_key(d)}"] = idx[i]
        eps_best[delta_key(d)], _ = _finite(value)
        src[delta_key(d)] = (source if math.isfinite(value)
                             else "overflow" if source == "overflow" else "unbounded")
    out["epsilon_at_delta"] = eps_best
    out["epsilon_at_delta_source"] = src

    table: dict[str, dict] = {}
    status: dict[str, dict] = {}
    for name in ACCOUNTANT_ORDER:
        acc = ACCOUNTANTS[name]
        table[name], status[name] = {}, {}
        sup = [acc.supports(c, adaptive) for c in comps]
        bad = next((s for s in sup if s != OK), None)
        for d in deltas:
            k = delta_key(d)
            if bad is not None:
                table[name][k], status[name][k] = None, bad
                continue
            if name == "pld" and acc.supports_delta(d) != OK:
                table[name][k], status[name][k] = None, acc.supports_delta(d)
                continue
            if any(d < c.delta_floor() for c in comps):    # (ε, δ) releases: no ε below Σδ_i
                table[name][k], status[name][k] = None, "unbounded"
                wit[f"epsilon.{name}.{k}"] = idx[next(i for i, c in enumerate(comps)
                                                      if d < c.delta_floor())]
                continue
            try:
                per = [acc.epsilon(c, d, adaptive) for c in comps]
            except PldSkipped as exc:
                table[name][k], status[name][k] = None, f"skipped:{exc}"
                continue
            value = max(per)
            wit[f"epsilon.{name}.{k}"] = idx[_argmax(per)]
            table[name][k], status[name][k] = _finite(value)
            if math.isinf(value):            # supported, so finite in exact arithmetic
                status[name][k] = OVERFLOW
    out["epsilon"] = table
    out["epsilon_status"] = status
    worst = max(comps, key=lambda c: (c.pure_epsilon(), c.gdp_mu2()))
    out["composition"] = worst.to_json()
    return out, wit


def _unbounded_block(deltas: Sequence[float]) -> dict:
    keys = [delta_key(d) for d in deltas]
    return {
        "pure_epsilon": None, "pure_epsilon_status": "unbounded",
        "gdp_mu": None, "gdp_mu_status": "unbounded",
        "zcdp_rho": None, "zcdp_rho_status": "unbounded",
        "epsilon_at_delta": {k: None for k in keys},
        "epsilon_at_delta_source": {k: "unbounded" for k in keys},
        "epsilon": {a: {k: None for k in keys} for a in ACCOUNTANT_ORDER},
        "epsilon_status": {a: {k: "unbounded" for k in keys} for a in ACCOUNTANT_ORDER},
        "composition": [],
    }


@dataclass
class PrivacySummary:
    """A privacy block read back into Python values (None for null; δ keys as floats)."""

    pure_epsilon: float | None
    gdp_mu: float | None
    zcdp_rho: float | None
    epsilon_at_delta: dict[float, float | None]
    epsilon: dict[str, dict[float, float | None]]
    statuses: dict[str, str]
    epsilon_status: dict[str, dict[float, str]]
    composition: Composition
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Mapping) -> "PrivacySummary":
        if not isinstance(d, Mapping):
            raise DpledgerError("a privacy block must be a JSON object")
        try:
            def fmap(m):
                return {float(k): (None if v is None else _num(v)) for k, v in m.items()}

            known = {"pure_epsilon", "gdp_mu", "zcdp_rho", "epsilon_at_delta", "epsilon",
                     "epsilon_status", "composition", "pure_epsilon_status", "gdp_mu_status",
                     "zcdp_rho_status", "epsilon_at_delta_source"}
            return cls(
                pure_epsilon=_opt(d["pure_epsilon"]), gdp_mu=_opt(d["gdp_mu"]),
                zcdp_rho=_opt(d.get("zcdp_rho")),
                epsilon_at_delta=fmap(d["epsilon_at_delta"]),
                epsilon={a: fmap(v) for a, v in d.get("epsilon", {}).items()},
                statuses={k: d[k] for k in ("pure_epsilon_status", "gdp_mu_status",
                                            "zcdp_rho_status") if k in d},
                epsilon_status={a: {float(k): s for k, s in v.items()}
                                for a, v in d.get("epsilon_status", {}).items()},
                composition=Composition.from_json(d.get("composition", [])),
                extra={k: v for k, v in d.items() if k not in known},
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, DpledgerError):
                raise
            raise DpledgerError(f"malformed privacy block: {exc!r}") from None


def _num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DpledgerError(f"expected a number, got {v!r}")
    return float(v)


def _opt(v: Any) -> float | None:
    return None if v is None else _num(v)


def dumps(obj: Any, compact: bool = False) -> str:
    """Canonical JSON text: insertion-ordered keys, repr floats, no NaN/inf; ``compact`` for
    bulk data files (no indentation lets json use its C encoder: ~10× faster)."""
    try:
        if compact:
            return json.dumps(obj, allow_nan=False, separators=(",", ":")) + "\n"
        return json.dumps(obj, allow_nan=False, indent=1) + "\n"
    except ValueError as exc:
        raise DpledgerError(f"refusing to write a non-finite number to JSON: {exc}") from None


def _umask() -> int:
    """The process's umask (read from /proc where it can be, so that it is never changed even
    for an instant; else set and restored)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_atomic(path: str | os.PathLike, write: Callable[[Any], None]) -> None:
    """Call ``write(fh)`` on a temp file in the target folder, fsync, rename onto ``path``; on
    any failure the temp file is removed and ``path`` is untouched."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        # mkstemp creates the file 0600; the result should follow the umask like any other
        # file the user writes (issue 13)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | os.PathLike, obj: Any, compact: bool = False) -> None:
    """Write ``obj`` to ``path`` atomically (temp file in the same folder, then rename)."""
    text = dumps(obj, compact)
    _write_atomic(path, lambda fh: fh.write(text))


def _stream(fh, obj: Any, chunk: int = 1 << 20) -> None:
    """Compact JSON of ``obj`` to ``fh``; numpy arrays (leaves) are written in chunks, so a
    column of 1e8 numbers never becomes 1e8 Python objects at once."""
    if isinstance(obj, np.ndarray):
        flat = obj.ravel()
        if flat.dtype.kind == "f" and not np.all(np.isfinite(flat)):
            raise DpledgerError("refusing to write a non-finite number to JSON")
        fmt = repr if flat.dtype.kind == "f" else str     # repr(float) is json's float text
        fh.write("[")
        for i in range(0, flat.size, chunk):
            if i:
                fh.write(",")
            fh.write(",".join(map(fmt, flat[i:i + chunk].tolist())))
        fh.write("]")
    elif isinstance(obj, Mapping):
        fh.write("{")
        for i, (k, v) in enumerate(obj.items()):
            fh.write(("," if i else "") + json.dumps(str(k)) + ":")
            _stream(fh, v, chunk)
        fh.write("}")
    else:
        fh.write(dumps(obj, compact=True).rstrip("\n"))


def write_json_stream_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Like :func:`write_json_atomic` (compact), for bulk data whose leaves are numpy arrays:
    the text is streamed to the temp file, never held whole in memory."""
    def write(fh):
        _stream(fh, obj)
        fh.write("\n")
    _write_atomic(path, write)


def read_json(path: str | os.PathLike) -> Any:
    """The JSON value in ``path``; a missing, unreadable, non-UTF-8 or malformed file is a
    DpledgerError naming the file (see :func:`dpledger.inputs.load_json`, which the commands
    call with what they expect)."""
    from dpledger.inputs import load_json
    return load_json(path, "a JSON file")
