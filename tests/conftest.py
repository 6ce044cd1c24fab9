"""Suite-wide checks.

The audit guard (issue 14, see ``tests/audit_guard.py``): every audit result built during a test,
and every audit.json written under the test's ``tmp_path`` (CLI subprocesses), must stay at or
below its certificate — audited bound, μ_lower against GDP μ, and the KOV bound at each δ of
ε(δ).  Tests that audit planted defects, or count violations at rate ≤ α, say so with
``@pytest.mark.audit_violations_expected(reason=...)``; no other test is exempt.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import audit_guard
from contextual_data import unit_rows

audit_guard.install()

# PostgreSQL stores keep their head anchors on the writing host (accounting/store_anchor.py):
# the suite's go to a folder of its own, not the user's ~/.local/state (subprocesses inherit it)
if "DPLEDGER_ANCHOR_DIR" not in os.environ:
    os.environ["DPLEDGER_ANCHOR_DIR"] = tempfile.mkdtemp(prefix="dpledger-anchors-")

# `dpledger run`'s PLD cache (accounting/pld_cache.py): the suite computes every number and does
# not write the user's ~/.cache (subprocesses inherit it; tests/test_pld_cache.py sets its own)
os.environ.setdefault("DPLEDGER_PLD_CACHE", "off")


@pytest.fixture(autouse=True)
def _no_audit_exceeds_its_certificate(request):
    audit_guard.RECORDED.clear()
    yield
    results = list(audit_guard.RECORDED)
    audit_guard.RECORDED.clear()
    if request.node.get_closest_marker("audit_violations_expected") is not None:
        return
    bad = audit_guard.excesses(results)
    tmp = request.node.funcargs.get("tmp_path") if hasattr(request.node, "funcargs") else None
    if tmp is not None:
        bad += audit_guard.excesses_in_files(tmp)
    if bad:
        pytest.fail("audit above its certificate in a test of correct policies/mechanisms "
                    "(mark planted-defect tests audit_violations_expected):\n  "
                    + "\n  ".join(bad[:10]), pytrace=False)


# -- a real PostgreSQL server for the store tests (tests/pg_server.py) ---------------------------
_PG: dict = {}


def missing_service(reason: str, opt_out: str):
    """A service the suite needs (PostgreSQL from the pgserver wheel, the package registry) is
    not there: a failure by default, so the README's test command cannot pass without the
    tests; a skip only when the user has said so by setting the environment variable
    ``opt_out`` to 1 (README: running the tests offline)."""
    if os.environ.get(opt_out) == "1":
        pytest.skip(f"{reason} ({opt_out}=1)")
    pytest.fail(f"{reason}; set {opt_out}=1 to skip these tests on this machine")


@pytest.fixture(scope="session")
def pg_server():
    """One PostgreSQL 16 server (the pgserver wheel) for the session; the tests that use it are
    failed when it cannot start, or skipped if DPLEDGER_TESTS_NO_POSTGRES=1 (:func:`missing_service`)."""
    import pg_server as pgs
    try:
        server = pgs.PgServer()
    except Exception as exc:                        # noqa: BLE001 - any failure to start
        missing_service(f"PostgreSQL (pgserver) cannot start here: {type(exc).__name__}: {exc}",
                        "DPLEDGER_TESTS_NO_POSTGRES")
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server):
    """A URL naming a fresh, empty PostgreSQL store location (its own schema)."""
    return pg_server.store_url()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A fresh store location on each backend: an SQLite file, then a PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    return request.getfixturevalue("pg_server").store_url()


# the data files (disjoint and shared tables, a uniformly logged replay CSV) of the contextual
# command-line tests
@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctx-data")
    rng = np.random.default_rng(0)
    T, K, dim = 200, 3, 4
    np.savez(d / "dis.npz", contexts=unit_rows(rng, (T, dim)), rewards=(rng.random((T, K)) < 0.5) * 1.0)
    np.savez(d / "sh.npz", contexts=unit_rows(rng, (T, K, dim)) * 0.9,
             rewards=rng.random((T, K)))
    L = 600
    x = unit_rows(rng, (L, 2))
    a = rng.integers(0, K, L)
    with open(d / "log.csv", "w") as fh:
        fh.write("x0,action,reward,x1,propensity\n")
        for i in range(L):
            fh.write(f"{float(x[i, 0])!r},{int(a[i])},{int(rng.random() < 0.3)},"
                     f"{float(x[i, 1])!r},{1 / K!r}\n")
    return d
