"""examples/serve_bandit.py at small size (CI): two HTTP worker processes on one store — an
SQLite file, and a PostgreSQL schema on the test server (tests/pg_server.py) — a bounded load
generator, then verify and status on the store."""
from __future__ import annotations

import importlib.util
import pathlib

from dpledger.accounting.store import verify_store

PATH = pathlib.Path(__file__).resolve().parents[1] / "examples" / "serve_bandit.py"


def test_served_example(store_url, capsys):
    spec = importlib.util.spec_from_file_location("serve_example", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    store = store_url
    out = mod.main(["--requests", "400", "--timeout", "120", "--epsilon", "0.5",
                    "--store", str(store)])
    stats, status = out["stats"], out["status"]
    assert stats["requests"] == 400 and stats["refused"] == 0
    assert stats["bad_request"][0] == 400 and "\n" not in stats["bad_request"][1]["error"]
    assert out["verify"] == 0 and "ok" in out["verify_out"]
    # two workers, runs 0 and 1, each with its own streams; every reward in one release
    assert status["streams"] == 6 and status["privacy"]["pure_epsilon"] == 0.5
    assert status["budget_spent"] <= 0.5
    assert verify_store(store) == []
    assert "served 400 requests" in capsys.readouterr().out
