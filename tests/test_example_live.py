"""examples/live_bandit.py runs (CI) and its store agrees with `dpledger run`'s certificate."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

from dpledger.accounting.filters import BudgetExceeded
from dpledger.accounting.releases import LaplaceRelease
from dpledger.accounting.store import LedgerStore, verify_store

PATH = pathlib.Path(__file__).resolve().parents[1] / "examples" / "live_bandit.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("live_example", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _releases_of(n: int) -> int:
    """Lazy-DP-TS releases of an arm pulled n times: its first reward, then one per complete
    epoch of 2, 4, 8, … fresh rewards."""
    if n == 0:
        return 0
    k, left, size = 1, n - 1, 2
    while left >= size:
        k, left, size = k + 1, left - size, 2 * size
    return k


def test_live_bandit_agrees_with_run_certificate(example, tmp_path, capsys):
    store_path = tmp_path / "live.db"
    out = example.main(["--horizon", "1500", "--epsilon", "0.5", "--seed", "4",
                        "--store", str(store_path)])
    assert all(out["agree"].values()), out["agree"]
    assert out["status"]["records"] == sum(_releases_of(n) for n in out["pulls"])
    assert out["status"]["privacy"]["pure_epsilon"] == 0.5 == out["certificate"]["pure_epsilon"]
    assert "agrees" in capsys.readouterr().out
    # the budget is spent exactly on every released reward: one more release is refused,
    # atomically, and the store still verifies
    with LedgerStore.open(store_path) as store:
        n = store.n_records()
        with pytest.raises(BudgetExceeded, match="index=0"):
            store.append(arm=0, start=0, stop=1, release=LaplaceRelease(scale=1000.0))
        assert store.n_records() == n
    assert verify_store(store_path) == []
