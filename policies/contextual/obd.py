"""The Open Bandit Dataset sample (Saito, Aihara, Matsutani & Narita, "Open Bandit Dataset and
Pipeline: Towards Realistic and Reproducible Off-Policy Evaluation", arXiv 2008.07146): logged
recommendations of the ZOZOTOWN fashion site, the small sample that ships inside the ``obp``
0.4.1 wheel on PyPI (Apache-2.0).  dpledger does not depend on ``obp``: ``dpledger data fetch
obd`` downloads that wheel with pip (no dependencies, no install), checks its sha256 against the
value pinned here, extracts the uniform-random campaigns' CSVs and converts one campaign to the
replay log format of ``--env replay``.

The ``random`` campaigns were logged by a uniformly random policy: 10 000 rows each; ``all`` has
80 items (propensity 1/80 = 0.0125 on every row), ``men`` 34 and ``women`` 46.  A replay
accepts about 1 row in K (≈ 125 rows for ``all``), with clicks rare: an integration case that
runs a real logged data set end to end, not a benchmark with statistical power.

Conversion (our choice): action = item_id, reward = click, propensity = propensity_score; the
context is the user: the four hashed categorical user features one-hot encoded (categories in
sorted order; 3 + 5 + 8 + 8 = 24 columns for ``all``) and scaled by 1/√4, so every context has
norm exactly 1 (``--norm-bound 1``).  The position (1–3) and the per-item affinity columns are
not used; every row is one event.
"""
from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import tempfile
import zipfile

from dpledger.errors import DpledgerError
from dpledger.policies.contextual.data import file_sha256

OBP_VERSION = "0.4.1"
OBP_WHEEL = f"obp-{OBP_VERSION}-py3-none-any.whl"
# sha256 of obp-0.4.1-py3-none-any.whl as PyPI served it on 2026-11-26 (1 338 290 bytes)
OBP_WHEEL_SHA256 = "87dec9caf4283c25ab13036532e0a24566f1c7bdcad1653a8ded43b2f5ef8208"
CAMPAIGNS = ("all", "men", "women")
USER_FEATURES = ("user_feature_0", "user_feature_1", "user_feature_2", "user_feature_3")
_PREFIX = "obp/dataset/obd/random/"


def default_dir() -> str:
    """``$XDG_CACHE_HOME/dpledger`` or ``~/.cache/dpledger``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dpledger")


def download_wheel(folder: str) -> str:
    """``pip download --no-deps obp==0.4.1`` into ``folder`` with this interpreter's pip; the
    wheel's path.  A failure (no network, no pip) is one line naming pip's last words."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--no-cache-dir", "--disable-pip-version-check", f"obp=={OBP_VERSION}", "-d", folder]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DpledgerError(f"pip download of obp=={OBP_VERSION} failed: {exc}") from None
    path = os.path.join(folder, OBP_WHEEL)
    if done.returncode != 0 or not os.path.isfile(path):
        last = [ln for ln in (done.stderr or done.stdout or "").splitlines()
                if ln.strip() and not ln.startswith("WARNING: Location")]
        raise DpledgerError(f"pip could not download obp=={OBP_VERSION} (is the package registry "
                            f"reachable?): {last[-1].strip() if last else 'no output'}")
    return path


def _write_atomic(path: str, data: bytes) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".obd-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def extract(wheel: str, folder: str) -> list[str]:
    """The random campaigns' CSVs (logs and item_context.csv) of the wheel, written under
    ``folder/obd/random/<campaign>/``; the paths written."""
    out = []
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if name.startswith(_PREFIX) and name.endswith(".csv"):
                dest = os.path.join(folder, "obd", "random", *name[len(_PREFIX):].split("/"))
                _write_atomic(dest, zf.read(name))
                out.append(dest)
    if not out:
        raise DpledgerError(f"{OBP_WHEEL} holds no {_PREFIX}… CSV files")
    return out


def convert(campaign_csv: str) -> tuple[str, dict]:
    """One campaign's log as replay CSV text (module docstring) and a description."""
    with open(campaign_csv, newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise DpledgerError(f"{campaign_csv} has no rows")
    cats = {f: sorted({r[f] for r in rows}) for f in USER_FEATURES}
    scale = repr(1.0 / len(USER_FEATURES) ** 0.5)
    columns = [f"u{i}_{c[:8]}" for i, f in enumerate(USER_FEATURES) for c in cats[f]]
    buf = io.StringIO()
    buf.write(",".join(["action", "reward", "propensity", *columns]) + "\n")
    for r in rows:
        onehot = [scale if r[f] == c else "0" for f in USER_FEATURES for c in cats[f]]
        buf.write(",".join([r["item_id"], r["click"], r["propensity_score"], *onehot]) + "\n")
    items = sorted({int(r["item_id"]) for r in rows})
    info = {"rows": len(rows), "items": len(items), "max_item": items[-1],
            "clicks": sum(int(r["click"]) for r in rows), "context_dim": len(columns),
            "propensities": sorted({float(r["propensity_score"]) for r in rows})}
    return buf.getvalue(), info


def fetch_obd(folder: str, campaign: str = "all") -> dict:
    """Download, check, extract and convert (module docstring); returns the replay log's path
    and a description.  Nothing is written before the wheel's sha256 has been checked."""
    if campaign not in CAMPAIGNS:
        raise DpledgerError(f"--campaign must be one of {', '.join(CAMPAIGNS)}, got {campaign!r}")
    with tempfile.TemporaryDirectory(prefix="dpledger-obp-") as tmp:
        wheel = download_wheel(tmp)
        sha = file_sha256(wheel)
        if sha != OBP_WHEEL_SHA256:
            raise DpledgerError(f"{OBP_WHEEL} has sha256 {sha}, not the pinned "
                                f"{OBP_WHEEL_SHA256}: refusing to use it")
        files = extract(wheel, folder)
    src = os.path.join(folder, "obd", "random", campaign, f"{campaign}.csv")
    text, info = convert(src)
    log = os.path.join(folder, f"obd-random-{campaign}.replay.csv")
    _write_atomic(log, text.encode())
    info.update(log=log, wheel_sha256=sha, extracted=len(files), campaign=campaign)
    return info
