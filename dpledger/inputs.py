"""Every file the command line reads, every path it writes and every number it parses.

One place answers bad input clearly (issue 13): a loader names the file and what it expected
("a run.json was expected; this is an audit result"), an output path is checked — a writable
folder, not a directory, a supported extension — *before* any work starts, and a number typed
on the command line is echoed back as typed (``--horizon 1e30``, not its float's digits).

Every failure is a :class:`~dpledger.errors.DpledgerError`: the CLI turns it into one line on
stderr and exit status 2.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import tempfile
from fractions import Fraction
from typing import Any, Iterable, Sequence

from dpledger.errors import DpledgerError

# Figure formats the plots are written in (matplotlib's Agg canvas writes each of these without
# extra programs; a name without an extension is written as PNG).  tests/test_cli_bad_inputs.py
# saves a figure in every one.
PLOT_EXTENSIONS = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff")


# ---- reading -----------------------------------------------------------------------------------

def _reject_constant(name: str):
    raise ValueError(f"non-finite number {name}")


def _no_nul(path: str, what: str) -> None:
    if "\0" in path:       # the OS cannot name such a file (open() raises ValueError)
        raise DpledgerError(f"{what} {path!r} contains a NUL character")


# Peak memory of reading a file, as a multiple of its size (measured peak RSS): JSON becomes
# Python objects (a 35 MB ledger: 7.5× while parsed, 9× through `show`), comma-separated text
# becomes float64 through numpy's parser, .npy is the array itself plus the table's checks.
JSON_READ_FACTOR = 10
CSV_READ_FACTOR = 6
NPY_READ_FACTOR = 4


def special_file_kind(mode: int) -> str | None:
    """What a non-regular, non-directory file is, in words (None for a regular file or a
    directory)."""
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None


def refuse_special_file(path: str, expected: str, where: str | None = None,
                        mode: int | None = None) -> None:
    """Refuse a device, pipe or socket named where a file is expected, before anything opens it
    (opening a named pipe blocks until someone writes to it: a silent hang; a device such as
    /dev/urandom never ends).  A missing path or a folder is left to the loader's message."""
    if mode is None:
        if not isinstance(path, str) or path == "" or "\0" in path:
            return
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return
    kind = special_file_kind(mode)
    if kind is not None:
        raise DpledgerError(f"{where or path} is {kind}, not a regular file; {expected} was "
                            "expected (dpledger reads regular files only, whose size it checks "
                            "first)")


def check_input_file(path: str, expected: str, read_factor: float = 1.0,
                     option: str | None = None) -> int:
    """The size of ``path`` after checking, before any byte is read, that it is a regular file
    (a device such as /dev/urandom or /dev/zero never ends; a pipe has no size to check) and
    that reading it (``read_factor`` × its size) fits in the memory available
    (:func:`dpledger.resources.check_fits`).  ``expected`` names what the caller wanted;
    ``option`` the flag that named the file, if any."""
    from dpledger.resources import check_fits, fmt_bytes
    where = f"{option} {path}" if option else path
    if path == "":
        raise DpledgerError(f"an empty file name was given where {expected} was expected")
    _no_nul(path, "the file name")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DpledgerError(f"no such file: {path} ({expected} was expected)") from None
    except OSError as exc:
        raise DpledgerError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise DpledgerError(f"{where} is a directory; {expected} was expected")
    refuse_special_file(path, expected, where, st.st_mode)
    size = int(st.st_size)
    check_fits(f"reading {path} ({fmt_bytes(size)})", int(size * read_factor),
               "is it the file you meant?")
    return size


def read_bytes(path: str | os.PathLike, expected: str, read_factor: float = 1.0,
               option: str | None = None) -> bytes:
    """The bytes of the regular file ``path`` (:func:`check_input_file`), read up to the size
    checked: a file that grows while it is read is refused, not read without end."""
    path = os.fspath(path)
    size = check_input_file(path, expected, read_factor, option)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(size + 1)
    except OSError as exc:
        raise DpledgerError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > size:
        raise DpledgerError(f"{path} grew while it was read ({size} bytes when checked); "
                            f"{expected} was expected")
    return raw


def load_json(path: str | os.PathLike, expected: str, option: str | None = None) -> Any:
    """The JSON value in ``path``; ``expected`` (e.g. "a run.json") names what the caller wanted,
    for the message when the file cannot be read at all."""
    path = os.fspath(path)
    raw = read_bytes(path, expected, JSON_READ_FACTOR, option)
    try:
        text = raw.decode("utf-8-sig")      # a byte-order mark (Windows editors) is no data
    except UnicodeDecodeError as exc:
        raise DpledgerError(f"{path} is not UTF-8 text (byte {exc.start}); {expected} was "
                            "expected") from None
    if not text.strip():
        raise DpledgerError(f"{path} is empty; {expected} was expected")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise DpledgerError(f"malformed JSON in {path}: {exc.msg} (line {exc.lineno}); "
                            f"{expected} was expected") from None
    except ValueError as exc:       # NaN / Infinity: never written by dpledger
        raise DpledgerError(f"malformed JSON in {path}: {exc}") from None
    except RecursionError:
        raise DpledgerError(f"malformed JSON in {path}: nested too deeply") from None


def document_kind(obj: Any) -> str:
    """What a JSON value looks like, in words (for "X was expected; this is Y")."""
    if isinstance(obj, dict):
        if not obj:
            return "an empty JSON object"
        keys = set(obj)
        if "schema_version" in keys:    # only run.json has it (a broken one: the loader says
            return "a run.json"         # what is missing)
        if {"trials", "pair"} <= keys and ("epsilon_lower" in keys or "mu_lower" in keys):
            return "an audit result (the output of dpledger audit)"
        if {"releases", "rows"} <= keys:
            return "a ledger (the .ledger.json written by dpledger run)"
        if {"experiment", "configs"} <= keys:
            return "an experiment.json (the output of dpledger experiment)"
        if "cell_schema" in keys:
            return "a sweep cell (cells/*.json of an experiment)"
        if {"pure_epsilon", "epsilon_at_delta"} <= keys:
            return "a privacy block (the output of dpledger compose --json)"
        shown = ", ".join(sorted(keys)[:4]) + (", …" if len(keys) > 4 else "")
        return f"a JSON object with keys {shown}"
    if isinstance(obj, list):
        if obj and all(isinstance(d, dict) and "implemented" in d for d in obj):
            return "a policy list (the output of dpledger policies --json)"
        return "a JSON array"
    return f"a JSON {type(obj).__name__.replace('str', 'string').replace('NoneType', 'null')}"


_NUM = (int, float)
# The parts of a run.json the commands read, with their types (dict: nested; a tuple: any of).
_RUN_SCHEMA: dict = {
    "schema_version": int,
    "policy": {"name": str, "params": dict, "provenance": str},
    "environment": {"name": str, "means": list},
    "horizon": int, "runs": int, "seed": (int, type(None)),      # null: --rng os
    "regret": {"final_mean": _NUM, "final_std": (int, float, type(None)),
               "curve": {"t": list, "mean": list, "lo": list, "hi": list}},
    "privacy": {
        "deltas": list,
        "theorem": {"pure_epsilon": (int, float, type(None)), "gdp_mu": (int, float, type(None)),
                    "epsilon_at_delta": dict},
        "certificate": {"pure_epsilon": (int, float, type(None)),
                        "gdp_mu": (int, float, type(None)), "epsilon_at_delta": dict,
                        "candidates": list},
        "realized": {"pure_epsilon": (int, float, type(None)),
                     "gdp_mu": (int, float, type(None)), "epsilon_at_delta": dict,
                     "label": str, "compositions": list, "composition": list},
        "checks": {"realized_le_certificate": bool, "certificate_le_theorem": bool},
    },
    "ledger": {"rows": int, "distinct_releases": int, "noise_draws": int},
}


# A contextual run.json (``dpledger run`` on --env linear, contextual-table, supervised or
# replay): the environment names arms and dimension instead of arm means, a ``contextual`` block
# describes the model and the delay, and a replay's regret is a status (no counterfactuals).
_CONTEXTUAL_SCHEMA: dict = {
    **{k: v for k, v in _RUN_SCHEMA.items() if k not in ("environment", "regret")},
    "environment": {"name": str, "arms": int, "dim": int, "range": list},
    "contextual": {"model": str, "streams": int, "delay": int, "privacy_model": str,
                   "rounds": list, "observations": list},
    "reward": {"per_run": list},
}


def _check_schema(obj: Any, schema: dict, where: str) -> None:
    for key, kind in schema.items():
        if key not in obj:
            raise DpledgerError(f"{where}{key} is missing")
        value = obj[key]
        if isinstance(kind, dict):
            if not isinstance(value, dict):
                raise DpledgerError(f"{where}{key} must be a JSON object")
            _check_schema(value, kind, f"{where}{key}.")
        elif not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise DpledgerError(f"{where}{key} has the wrong type ({type(value).__name__})")


def whole_field(name: str, value: Any, minimum: int) -> int:
    """A run.json integer field, refused (DpledgerError) unless it is an integer ≥ ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DpledgerError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_run_counts(rep: dict, seed_optional: bool = True) -> tuple[int, int]:
    """(horizon, runs) of a run.json, each an integer ≥ 1, and its seed an integer ≥ 0 (or null
    when ``seed_optional``: a run seeded from the OS): what every command that reads a run.json
    refuses alike (``show``, ``curve`` and ``verify``)."""
    T, R = whole_field("horizon", rep["horizon"], 1), whole_field("runs", rep["runs"], 1)
    if not (seed_optional and rep["seed"] is None):
        whole_field("seed", rep["seed"], 0)
    return T, R


def load_run_json(path: str | os.PathLike, schema: bool = True) -> dict:
    """A run.json (the output of ``dpledger run``, or an experiment's runs/*.json), checked for
    every field the commands read; anything else is refused naming the file and what it holds.
    ``schema=False`` (``verify``) checks only that the file is a run.json at all: verify reports
    a tampered field as a finding of its own."""
    path = os.fspath(path)
    rep = load_json(path, "a run.json")
    kind = document_kind(rep)
    if kind != "a run.json":
        raise DpledgerError(f"{path}: a run.json was expected; this is {kind}")
    if not schema:
        return rep
    try:
        contextual = "contextual" in rep
        _check_schema(rep, _CONTEXTUAL_SCHEMA if contextual else _RUN_SCHEMA, "")
        if rep["schema_version"] != 1:
            raise DpledgerError(f"unsupported schema_version {rep['schema_version']!r}")
        check_run_counts(rep)
        if contextual:
            if not isinstance(rep.get("regret"), dict):
                raise DpledgerError("regret must be a JSON object")
            if "status" not in rep["regret"]:
                _check_schema(rep, {"regret": _RUN_SCHEMA["regret"]}, "")
        curve = rep["regret"].get("curve", {"t": [0], "mean": [0], "lo": [0], "hi": [0]})
        n = len(curve["t"])
        if n == 0 or any(len(curve[k]) != n for k in ("mean", "lo", "hi")):
            raise DpledgerError("regret.curve's t, mean, lo and hi must have one equal, "
                                "non-zero length")
        if not all(isinstance(v, _NUM) and not isinstance(v, bool)
                   for k in ("t", "mean", "lo", "hi") for v in curve[k]):
            raise DpledgerError("regret.curve holds a value that is not a number")
        deltas = rep["privacy"]["deltas"]
        if not deltas or not all(isinstance(d, str) for d in deltas):
            raise DpledgerError("privacy.deltas must be a non-empty list of δ strings")
        for d in deltas:
            try:
                float(d)
            except ValueError:
                raise DpledgerError(f"privacy.deltas holds {d!r}, not a number") from None
        for block in ("theorem", "certificate", "realized"):
            if any(d not in rep["privacy"][block]["epsilon_at_delta"] for d in deltas):
                raise DpledgerError(f"privacy.{block}.epsilon_at_delta lacks a δ of "
                                    "privacy.deltas")
    except DpledgerError as exc:
        raise DpledgerError(f"{path}: malformed run.json: {exc}") from None
    return rep


def load_ledger(path: str | os.PathLike, option: str | None = None):
    """A ledger file (``<stem>.ledger.json`` of ``dpledger run``) as a RewardLedger."""
    from dpledger.accounting.ledger import RewardLedger
    path = os.fspath(path)
    data = load_json(path, "a ledger", option)
    kind = document_kind(data)
    if not kind.startswith("a ledger"):
        raise DpledgerError(f"{path}: a ledger was expected; this is {kind}")
    try:
        return RewardLedger.from_json(data)
    except DpledgerError as exc:
        raise DpledgerError(f"{path}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DpledgerError(f"{path}: malformed ledger: {exc!r}") from None


def load_table(path: str | os.PathLike, option: str | None = None):
    """A reward table (rows = rounds, columns = arms) from .npy, .json or comma-separated text."""
    path = os.fspath(path)
    _no_nul(path, "the table file name")
    if path and not os.path.lexists(path):
        raise DpledgerError(f"no such table file: {path}")
    expected = "a reward table (.npy, .csv or .json)"
    factor = NPY_READ_FACTOR if path.endswith(".npy") else \
        JSON_READ_FACTOR if path.endswith(".json") else CSV_READ_FACTOR
    check_input_file(path, expected, factor, option)
    try:
        if path.endswith(".npy"):
            table = _load_npy(path)
        elif path.endswith(".json"):
            data = load_json(path, "a reward table", option)
            table = _json_table(path, data)
        else:
            table = _load_csv(path)
    except DpledgerError:
        raise
    except UnicodeDecodeError:
        raise DpledgerError(f"malformed reward table {path}: not UTF-8 text") from None
    except (ValueError, OSError, EOFError) as exc:
        raise DpledgerError(f"malformed reward table {path}: {_one_line(exc)}") from None
    if table.dtype.kind not in "biuf":
        raise DpledgerError(f"malformed reward table {path}: it holds "
                            f"{_DTYPE_WORDS.get(table.dtype.kind, 'values that are not numbers')}"
                            ", not numbers")
    return table


# numpy's kinds of values, in words (a table must hold numbers)
_DTYPE_WORDS = {"U": "text", "S": "bytes", "c": "complex numbers", "O": "Python objects",
                "V": "structured records", "M": "dates", "m": "time spans"}


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _load_npy(path: str):
    """A .npy array; a file that is not one, or that holds pickled Python objects (never
    unpickled: that would run code from the file), is refused in words."""
    import numpy as np
    with open(path, "rb") as fh:
        if fh.read(6) != b"\x93NUMPY":
            raise DpledgerError(f"malformed reward table {path}: not a NumPy .npy file (it "
                                "lacks the .npy header)")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise DpledgerError(f"malformed reward table {path}: it holds Python objects, not "
                                "numbers (dpledger never unpickles a file)") from None
        raise DpledgerError(f"malformed reward table {path}: a damaged .npy file "
                            f"({_one_line(exc)})") from None


_CSV_COLUMNS = re.compile(r"number of columns changed from (\d+) to (\d+) at row (\d+)")
_CSV_VALUE = re.compile(r"could not convert string '(.*)' to \w+ at row (\d+), column (\d+)")


def _load_csv(path: str):
    """Comma-separated numbers, one row per line; numpy's complaints (a ragged row, a word)
    are said in lines and columns, without its advice about its own arguments."""
    import warnings
    import numpy as np
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)     # "input contained no data"
            return np.loadtxt(path, delimiter=",", ndmin=2, encoding="utf-8-sig")
    except UserWarning:
        raise DpledgerError(f"malformed reward table {path}: it holds no numbers") from None
    except ValueError as exc:
        text = str(exc)
        m = _CSV_COLUMNS.search(text)
        if m:
            raise DpledgerError(f"malformed reward table {path}: line {m.group(3)} has "
                                f"{m.group(2)} columns, the lines before it "
                                f"{m.group(1)}") from None
        m = _CSV_VALUE.search(text)
        if m:
            raise DpledgerError(f"malformed reward table {path}: line {int(m.group(2)) + 1}, "
                                f"column {m.group(3)} holds {m.group(1)!r}, not a "
                                "number") from None
        raise


def _json_table(path: str, data):
    """A JSON array of equally long arrays of numbers as a float64 table."""
    import numpy as np
    if not isinstance(data, list):
        raise DpledgerError(f"{path}: a reward table (a JSON array of rows) was "
                            f"expected; this is {document_kind(data)}")
    width = None
    for i, row in enumerate(data):
        if not isinstance(row, list):
            raise DpledgerError(f"malformed reward table {path}: row {i + 1} is "
                                f"{document_kind(row)}, not an array of numbers")
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise DpledgerError(f"malformed reward table {path}: row {i + 1} has {len(row)} "
                                f"values, the rows before it {width}")
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise DpledgerError(f"malformed reward table {path}: row {i + 1}, column "
                                    f"{j + 1} is {document_kind(v)}, not a number")
    return np.array(data, dtype=np.float64)


# ---- the ledger file's record in run.json (written by `run`, checked by `verify`) --------------

def sha256_file(path: str | os.PathLike) -> tuple[str, int]:
    """(sha256 hex digest, size in bytes) of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def ledger_file_record(ledger_path: str | os.PathLike, run_json_path: str | os.PathLike) -> dict:
    """run.json's record of the ledger file it accompanies: the file's name relative to run.json's
    folder (no absolute path, docs/design.md#interfaces-and-json), its sha256 and its size."""
    sha, size = sha256_file(ledger_path)
    rel = os.path.relpath(os.path.abspath(ledger_path),
                          os.path.dirname(os.path.abspath(run_json_path)))
    return {"file": rel.replace(os.sep, "/"), "sha256": sha, "bytes": size}


# ---- writing -----------------------------------------------------------------------------------

def _nearest_existing(path: str) -> str:
    p = os.path.abspath(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def _probe_folder(option: str, path: str, folder: str) -> None:
    """Raise unless a file can be created in ``folder`` (created by the write if missing): the
    nearest existing ancestor must be a directory we can write in.  Probing by creating (and
    removing) a file is the only test that also holds for root and read-only mounts."""
    base = _nearest_existing(folder)
    if not os.path.isdir(base):
        raise DpledgerError(f"{option} {path}: {base} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".dpledger-probe-", dir=base)
    except OSError as exc:
        raise DpledgerError(f"{option} {path}: cannot write in {base} "
                            f"({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: str, option: str, extensions: Sequence[str] | None = None) -> str:
    """Raise unless ``path`` can be written as a file: not a directory nor a special file, in a
    folder we can write in (or can create), with one of ``extensions`` when given (a name
    without extension is allowed then: it is written in the first format)."""
    if not isinstance(path, str) or path.strip() == "":
        raise DpledgerError(f"{option} needs a file name")
    _no_nul(path, option)
    if os.path.isdir(path):
        raise DpledgerError(f"{option} {path} is a directory; give a file name, e.g. "
                            f"{os.path.join(path, 'out' + ('.' + extensions[0] if extensions else '.json'))}")
    if os.path.exists(path) and not os.path.isfile(path):
        kind = special_file_kind(os.stat(path).st_mode) or "not a regular file"
        raise DpledgerError(f"{option} {path} is {kind}, not a regular file that can be "
                            "replaced" if kind != "not a regular file" else
                            f"{option} {path} exists and is not a regular file")
    if extensions is not None:
        ext = os.path.splitext(path)[1][1:].lower()
        if ext and ext not in extensions:
            raise DpledgerError(f"{option} {path}: unsupported file type .{ext}; use one of "
                                + ", ".join("." + e for e in extensions))
    _probe_folder(option, path, os.path.dirname(os.path.abspath(path)))
    return path


def check_output_dir(path: str, option: str) -> str:
    """Raise unless ``path`` is (or can be created as) a folder we can write in."""
    if not isinstance(path, str) or path.strip() == "":
        raise DpledgerError(f"{option} needs a folder name")
    _no_nul(path, option)
    if os.path.exists(path) and not os.path.isdir(path):
        kind = special_file_kind(os.stat(path).st_mode)
        raise DpledgerError(f"{option} {path} exists and is not a folder"
                            + (f" (it is {kind})" if kind else ""))
    _probe_folder(option, path, os.path.abspath(path))
    return path


def check_distinct(paths: Iterable[tuple[str, str | None]]) -> None:
    """Raise if two outputs ((option, path) pairs; None = not written) name the same file."""
    seen: dict[str, str] = {}
    for option, path in paths:
        if path is None:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise DpledgerError(f"{seen[key]} and {option} name the same file {path}")
        seen[key] = option


# ---- messages in the user's terms ----------------------------------------------------------------

# Keyword arguments of the Python API that the command line spells as flags.
API_FLAGS = {"stop_at": "--stop-at", "max_trials": "--max-trials", "until_ratio": "--until-ratio",
             "selection_fraction": "--selection-fraction", "ledger_out": "--ledger-out"}


def in_flag_terms(exc: DpledgerError, flags: dict[str, str] = API_FLAGS) -> DpledgerError:
    """A library error re-worded for the command line: each API keyword (``stop_at``) becomes
    the flag the user typed (``--stop-at``)."""
    text = str(exc)
    for name, flag in flags.items():
        text = re.sub(rf"(?<![-\w]){name}(?!\w)", flag, text)
    return DpledgerError(text)


# ---- numbers typed on the command line ---------------------------------------------------------

MAX_WORKERS = 1024      # --workers: more is a typo (each is a process or thread; 1e30 would
                        # have the simulator build a list of 1e30 chunks)

_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?")


def _exact(option: str, text: str, what: str) -> Fraction:
    """The exact value of a decimal literal (digits, optional point, optional exponent)."""
    t = text.strip() if isinstance(text, str) else text
    if not isinstance(t, str) or t == "":
        raise DpledgerError(f"{option} must be {what}, got {text!r}")
    m = _DECIMAL.fullmatch(t) if len(t) <= 60 else None
    if m is None:
        low = t.lower().lstrip("+-")
        if low in ("nan", "inf", "infinity"):
            raise DpledgerError(f"{option} must be a finite number, got {text!r}")
        raise DpledgerError(f"{option} must be {what}, got {text!r}")
    if m.group(1) is not None and abs(int(m.group(1))) > 400:
        # beyond any double and any supported count: keep the sign of the exponent, not its
        # size (10^(10^9) would take minutes to build)
        mant = t[:m.start(1) - 1]
        return Fraction(f"{mant}e{400 if int(m.group(1)) > 0 else -400}")
    return Fraction(t)


def _int_text(n: int) -> str:
    """1000000000 as "1e9" (as the help texts write it); other integers as digits."""
    digits = str(n)
    if n >= 10 ** 6 and digits.rstrip("0") == "1":
        return f"1e{len(digits) - 1}"
    return digits


def parse_int(option: str, text: str, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """An integer written as digits or in exponent form (``1e5``), exactly: ``1e30`` is 10³⁰,
    never the float's 1000000000000000019884624838656; messages echo the text as typed."""
    if isinstance(text, str) and len(text.strip()) > 40:
        raise DpledgerError(f"{option} must be an integer, got {text[:40]!r}… (too long)")
    value = _exact(option, text, "an integer")
    if value.denominator != 1:
        raise DpledgerError(f"{option} must be an integer, got {text!r}")
    n = int(value)
    if minimum is not None and n < minimum:
        raise DpledgerError(f"{option} must be >= {minimum}, got {text!r}")
    if maximum is not None and n > maximum:
        raise DpledgerError(f"{option} must be <= {_int_text(maximum)}, got {text!r}")
    return n


def parse_float(option: str, text: str, *, minimum: float | None = None,
                maximum: float | None = None, open_interval: bool = False) -> float:
    """A finite float; a literal that over- or underflows double precision (``1e400``,
    ``1e-400``) is refused as such rather than read as inf or 0."""
    value = _exact(option, text, "a number")
    x = float(value) if abs(value) < Fraction(10) ** 309 else math.inf
    if math.isinf(x):
        raise DpledgerError(f"{option} {text.strip()} is too large for double precision")
    if x == 0.0 and value != 0:
        raise DpledgerError(f"{option} {text.strip()} is too small for double precision "
                            "(it would be read as 0)")
    lo_bad = minimum is not None and (x <= minimum if open_interval else x < minimum)
    hi_bad = maximum is not None and (x >= maximum if open_interval else x > maximum)
    if lo_bad or hi_bad:
        if minimum is not None and maximum is not None:
            rng = f"({minimum:g}, {maximum:g})" if open_interval else f"[{minimum:g}, {maximum:g}]"
            raise DpledgerError(f"{option} must lie in {rng}, got {text.strip()}")
        if lo_bad:
            raise DpledgerError(f"{option} must be {'>' if open_interval else '>='} "
                                f"{minimum:g}, got {text.strip()}")
        raise DpledgerError(f"{option} must be {'<' if open_interval else '<='} {maximum:g}, "
                            f"got {text.strip()}")
    return x


def split_list(option: str, text: str) -> list[str]:
    """Comma-separated items; an empty item (``0.9,,0.4``, a trailing comma) is an error, not
    dropped."""
    if not isinstance(text, str) or text.strip() == "":
        raise DpledgerError(f"{option} needs comma-separated values, got {text!r}")
    items = [x.strip() for x in text.split(",")]
    if any(x == "" for x in items):
        raise DpledgerError(f"{option} has an empty item in {text!r}")
    return items


def parse_floats(option: str, text: str, **bounds) -> list[float]:
    """Comma-separated floats, each as :func:`parse_float` (bounds apply to each item)."""
    out = []
    for item in split_list(option, text):
        try:
            out.append(parse_float(option, item, **bounds))
        except DpledgerError as exc:
            raise DpledgerError(f"{exc} (in {text!r})" if item != text.strip() else str(exc)) \
                from None
    return out


def parse_range(option: str, text: str) -> tuple[float, float]:
    """``lo,hi``: two numbers as typed, checked as every environment checks its range
    (:func:`dpledger.policies.environments.check_range`: lo < hi, a finite width), before any
    work that would use it."""
    from dpledger.policies.environments import check_range
    items = split_list(option, text)
    if len(items) != 2:
        raise DpledgerError(f"{option} expects lo,hi, got {text!r}")
    lo, hi = (parse_float(option, x) for x in items)
    try:
        return check_range(lo, hi)
    except DpledgerError as exc:
        raise DpledgerError(f"{option} {text.strip()}: {exc}") from None


def parse_deltas(option: str, texts: Sequence[str]) -> list[float]:
    """δ values (each in the open interval (0, 1)) from repeated options or comma lists."""
    out = []
    for t in texts:
        out += parse_floats(option, t, minimum=0.0, maximum=1.0, open_interval=True)
    return out
