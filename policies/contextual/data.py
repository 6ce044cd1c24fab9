"""Reading contextual data from files: .npz tables, scikit-learn's classification data sets, and
replay logs (CSV).  Every bad input is one :class:`~dpledger.errors.DpledgerError` naming the
file and what was expected; files are checked to be regular files, and their size is turned
into a memory estimate *before* anything is loaded (refused with the estimate when it cannot
fit)."""
from __future__ import annotations

import zipfile

import numpy as np

from dpledger.errors import DpledgerError
from dpledger.policies.contextual import environments as CE

SUPERVISED_DATASETS = ("digits", "wine", "breast_cancer", "iris")
_PARSE_CHUNK = 65536            # CSV lines parsed per block
_PARSE_FACTOR = 3               # parsed arrays and a block of text beside them: ≤ 3× the data


def regular_file(path: str, option: str, what: str) -> int:
    """The size of ``path``, which must be a regular file (not a folder, a device such as
    /dev/zero, or a pipe): :func:`dpledger.inputs.check_input_file`, the memory left to the
    caller's own estimate (:func:`check_fits`)."""
    from dpledger.inputs import check_input_file
    if not isinstance(path, str) or path == "":
        raise DpledgerError(f"{option} needs a file name")
    return check_input_file(path, what, read_factor=0.0, option=option)


def file_sha256(path: str) -> str:
    """The sha256 of the file at ``path`` (:func:`dpledger.inputs.sha256_file`)."""
    from dpledger.inputs import sha256_file
    return sha256_file(path)[0]


def check_fits(need: int, what: str) -> None:
    """Refuse to load data needing more than half the memory available (the simulation needs
    the rest): :func:`dpledger.resources.check_fits` with that allowance."""
    from dpledger.resources import available_memory
    from dpledger.resources import check_fits as fits
    avail = available_memory()
    if avail is not None:
        fits(what, 2 * int(need), "refusing to load it (it may use at most half of it)", avail)


def load_npz_table(path: str, norm_bound: float = 1.0, lo: float = 0.0, hi: float = 1.0,
                   clip: bool = False) -> CE.ContextualEnvironment:
    """``--env contextual-table --table FILE``: a .npz holding ``contexts`` (T, d) or (T, K, d)
    and ``rewards`` (T, K), real numbers."""
    expected = "a .npz with arrays 'contexts' and 'rewards'"
    regular_file(path, "--table", expected)
    try:
        with zipfile.ZipFile(path) as zf:
            need = sum(i.file_size for i in zf.infolist())
    except (zipfile.BadZipFile, OSError):
        raise DpledgerError(f"--table {path}: not a .npz file; {expected} was expected") from None
    check_fits(2 * need, f"--table {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            keys = sorted(data.files)
            missing = [k for k in ("contexts", "rewards") if k not in keys]
            if missing:
                raise DpledgerError(f"--table {path}: no array {' or '.join(map(repr, missing))}; "
                                    f"{expected} was expected (it holds "
                                    f"{', '.join(map(repr, keys)) or 'nothing'})")
            contexts, rewards = data["contexts"], data["rewards"]
    except DpledgerError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise DpledgerError(f"--table {path}: cannot read it as .npz ({exc})") from None
    for name, arr in (("contexts", contexts), ("rewards", rewards)):
        if arr.dtype.kind not in "iuf":
            raise DpledgerError(f"--table {path}: '{name}' must hold real numbers, not "
                                f"{arr.dtype.name} values")
    try:
        return CE.contextual_table(contexts, rewards, norm_bound, lo, hi,
                                   source={"table_sha256": file_sha256(path)}, clip=clip)
    except DpledgerError as exc:
        raise DpledgerError(f"--table {path}: {str(exc).removeprefix('contextual table: ')}") \
            from None


def load_supervised(name: str, norm_bound: float = 1.0, lo: float = 0.0, hi: float = 1.0
                    ) -> CE.ContextualEnvironment:
    """``--env supervised --dataset NAME``: a classification data set scikit-learn ships inside
    its wheel (no download)."""
    if name not in SUPERVISED_DATASETS:
        raise DpledgerError(f"--dataset must be one of {', '.join(SUPERVISED_DATASETS)}, got "
                            f"{name!r}")
    try:
        from sklearn import datasets
    except ImportError:
        raise DpledgerError("--env supervised reads the data sets scikit-learn ships; install "
                            "it: pip install 'dpledger[contextual]'") from None
    loader = getattr(datasets, f"load_{name}")
    bunch = loader()
    return CE.supervised(bunch.data, bunch.target, name, norm_bound, lo, hi)


def _numbers(lines: list[str], first_row: int, header: list[str], path: str) -> np.ndarray:
    """A block of CSV lines as a (n, columns) float array; the first bad line is named."""
    ncol = len(header)
    try:
        arr = np.loadtxt(lines, delimiter=",", ndmin=2, dtype=np.float64)
        if arr.shape[1] == ncol:
            return arr
    except ValueError:
        pass
    for j, line in enumerate(lines):
        fields = line.split(",")
        if len(fields) != ncol:
            raise DpledgerError(f"--log {path}: data row {first_row + j} has {len(fields)} "
                                f"fields, the header {ncol}")
        for name, f in zip(header, fields, strict=True):
            try:
                v = float(f)
            except ValueError:
                raise DpledgerError(f"--log {path}: data row {first_row + j}, column "
                                    f"{name!r}: {f.strip()[:30]!r} is not a number") from None
            if v != v or v in (float("inf"), float("-inf")):
                raise DpledgerError(f"--log {path}: data row {first_row + j}, column "
                                    f"{name!r} is NaN or infinite")
    raise DpledgerError(f"--log {path}: cannot parse the rows from data row {first_row} on")


def read_log(path: str, context_columns: list[str] | None = None) -> dict:
    """A replay log (CSV with a header): columns ``action``, ``reward``, optional
    ``propensity``, and context columns (all others, or ``context_columns``).  Streamed in
    blocks after a size check: the file's size and its first block's bytes per line give an
    estimate of the rows, refused when the parsed arrays could not fit."""
    what = "a CSV log with a header naming action, reward, optional propensity and contexts"
    size = regular_file(path, "--log", what)
    if size == 0:
        raise DpledgerError(f"--log {path} is empty; {what} was expected")
    try:
        fh = open(path, "r", encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise DpledgerError(f"--log {path}: cannot read it ({exc.strerror or exc})") from None
    with fh:
        try:
            header_line = fh.readline()
            header = [h.strip() for h in header_line.strip().split(",")]
            if not header_line.strip():
                raise DpledgerError(f"--log {path} has no header line; {what} was expected")
            if len(header) < 2:
                raise DpledgerError(f"--log {path} has one column ({header[0]!r}); {what} "
                                    "was expected")
            if len(set(header)) != len(header) or "" in header:
                raise DpledgerError(f"--log {path}: the header names a column twice or has an "
                                    "empty name")
            for need in ("action", "reward"):
                if need not in header:
                    raise DpledgerError(f"--log {path}: no column {need!r} in the header "
                                        f"({', '.join(header[:6])}{', …' if len(header) > 6 else ''})")
            special = {"action", "reward", "propensity"}
            if context_columns is None:
                ctx_cols = [h for h in header if h not in special]
            else:
                bad = [c for c in context_columns if c not in header or c in special]
                if bad:
                    raise DpledgerError(f"--context-columns names {bad[0]!r}, which is not a "
                                        f"context column of {path}")
                if len(set(context_columns)) != len(context_columns):
                    raise DpledgerError("--context-columns names a column twice")
                ctx_cols = list(context_columns)
            if not ctx_cols:
                raise DpledgerError(f"--log {path} has no context columns (besides action, "
                                    "reward and propensity)")
            sample = fh.readlines(1 << 16)
            per_line = max(1.0, sum(len(s.encode()) for s in sample) / max(len(sample), 1))
            est_rows = int((size - len(header_line.encode())) / per_line) + 1
            check_fits(_PARSE_FACTOR * 8 * est_rows * len(header),
                       f"--log {path} (about {est_rows} rows of {len(header)} columns)")
            blocks = []
            row = 1
            pending = [s for s in sample if s.strip()]
            while True:
                while len(pending) < _PARSE_CHUNK:
                    more = fh.readlines(1 << 20)
                    if not more:
                        break
                    pending += [s for s in more if s.strip()]
                if not pending:
                    break
                block, pending = pending[:_PARSE_CHUNK], pending[_PARSE_CHUNK:]
                blocks.append(_numbers(block, row, header, path))
                row += len(block)
        except UnicodeDecodeError:
            raise DpledgerError(f"--log {path} is not UTF-8 text; {what} was expected") from None
    if not blocks:
        raise DpledgerError(f"--log {path} has a header but no data rows")
    data = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
    if not np.all(np.isfinite(data)):
        r, c = map(int, np.argwhere(~np.isfinite(data))[0])
        raise DpledgerError(f"--log {path}: data row {r + 1}, column {header[c]!r} is NaN or "
                            "infinite")
    col = {h: i for i, h in enumerate(header)}
    actions = data[:, col["action"]]
    if np.any(actions != np.round(actions)) or np.any(actions < 0):
        r = int(np.argmax((actions != np.round(actions)) | (actions < 0)))
        raise DpledgerError(f"--log {path}: data row {r + 1}: action {actions[r]:g} is not an "
                            "integer >= 0")
    return {"contexts": np.ascontiguousarray(data[:, [col[c] for c in ctx_cols]]),
            "actions": actions.astype(np.int64), "rewards": data[:, col["reward"]].copy(),
            "propensity": data[:, col["propensity"]].copy() if "propensity" in col else None,
            "context_columns": ctx_cols, "sha256": file_sha256(path)}


def load_replay(path: str, arms: int | None = None, context_columns: list[str] | None = None,
                mode: str = "uniform", norm_bound: float = 1.0, lo: float = 0.0,
                hi: float = 1.0, clip: bool = False) -> CE.ContextualEnvironment:
    """``--env replay --log FILE``: the log read by :func:`read_log`, checked and wrapped."""
    log = read_log(path, context_columns)
    try:
        return CE.replay(log["contexts"], log["actions"], log["rewards"], log["propensity"],
                         arms, mode, norm_bound, lo, hi,
                         source={"log_sha256": log["sha256"],
                                 "context_columns": log["context_columns"]}, clip=clip)
    except DpledgerError as exc:
        raise DpledgerError(f"--log {path}: {str(exc).removeprefix('the log: ')}") from None
