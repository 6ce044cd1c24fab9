"""A served run never repeats its noise (issue 30 §1), on both backends.

* the generation is read and written in the writer's transaction: processes racing to open one
  run (taking it over, so that the lease does not turn them away) get distinct generations and
  distinct generators, even with one fixed seed;
* one live server per run: a second live opening is refused in one line; an expired lease is
  taken over and the old holder's next write is refused, nothing written; a holder of this host
  whose process is gone is taken over at once;
* every generation g ≥ 1 mixes fresh operating-system entropy: a store restored from a backup
  hands out a generation again, with other noise;
* the policy is safe to share between threads.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from dpledger.accounting import store_checkpoint as ckpt
from dpledger.accounting.store import LedgerStore, verify_store
from dpledger.errors import DpledgerError
from dpledger.policies import online
from test_store_backends import _rows, _sql, _start_together

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT)

# opens run 0 of the store with seed 7 (every process the same seed), taking the lease over
# (as a racing restart would), and prints its generation and its generator's 128-bit state
OPENER = textwrap.dedent("""
    import os, sys, time
    from dpledger.policies import online
    url, k, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    open(f"{go}.ready{k}", "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    p = online("dp-ucb", 3, 500, store=url, seed=7, epsilon=0.5, take_over=True)
    state = p.rng.bit_generator.state["state"]["state"]
    print(p.generation, state, *p.rng.random(4).tolist())
""")


def _state(seq: np.random.SeedSequence) -> int:
    return np.random.PCG64(seq).state["state"]["state"]


def test_racing_openings_never_share_a_generation(store_url, tmp_path):
    """Six processes open run 0 at once with the same seed: generations 0 … 5, each once (the
    old code read the previous generation outside the transaction: all took the same one);
    six different generators, and their first draws all differ; generation 0's generator is
    the simulator's (the seed alone), every later one is not a seed-only stream."""
    LedgerStore.create(store_url).close()
    outs = _start_together(tmp_path, OPENER, store_url, 6)
    rows = [o.split() for o, _ in outs]
    gens = sorted(int(r[0]) for r in rows)
    assert gens == list(range(6))
    states = {int(r[1]) for r in rows}
    assert len(states) == 6
    draws = [tuple(r[2:]) for r in rows]
    assert len(set(draws)) == 6
    by_gen = {int(r[0]): int(r[1]) for r in rows}
    # generation 0 is the in-memory (simulator's) policy of seed 7, state for state
    mem = online("dp-ucb", 3, 500, seed=7, epsilon=0.5)
    assert by_gen[0] == mem.rng.bit_generator.state["state"]["state"]
    # a generation g >= 1 is not the seed-only stream spawn_key (0, g) of the old code
    for g in range(1, 6):
        assert by_gen[g] != _state(np.random.SeedSequence(7, spawn_key=(0, g)))
    with LedgerStore.open(store_url, readonly=True) as store:
        got = json.loads(store.checkpoint("online/run-0/generation")[1].decode())
        assert got == {"generation": 5, "entropy": "seed+os"}


def test_second_live_opening_is_refused_and_writes_nothing(store_url):
    p = online("lazy-dp-ts", 3, store=store_url, seed=1, epsilon=0.5)
    before = _rows(store_url, "SELECT name, data FROM checkpoints ORDER BY name")
    with pytest.raises(ckpt.LeaseHeld) as err:
        online("lazy-dp-ts", 3, store=store_url, seed=1, epsilon=0.5)
    assert "\n" not in str(err.value) and "run 0 is served by another policy" in str(err.value)
    assert _rows(store_url, "SELECT name, data FROM checkpoints ORDER BY name") == before
    # another run of the same store is free
    q = online("lazy-dp-ts", 3, store=store_url, seed=1, epsilon=0.5, run=1)
    q.close()
    p.close()
    # given back at close: the next opening takes generation 1
    r = online("lazy-dp-ts", 3, store=store_url, seed=1, epsilon=0.5)
    assert r.generation == 1
    r.close()


def _serve(p, rounds: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        tk = p.select()
        p.observe(tk, float(rng.random() < 0.5))


def test_expired_lease_is_taken_over_and_the_old_holder_writes_nothing(store_url):
    p = online("lazy-dp-ts", 3, store=store_url, seed=1, epsilon=0.5, lease_seconds=0.3)
    _serve(p, 30, 0)
    time.sleep(0.5)
    q = online("lazy-dp-ts", 3, store=store_url, seed=1, epsilon=0.5)     # expired: taken
    assert q.generation == 1
    n = q.store.n_records()
    with pytest.raises(ckpt.LeaseLost) as err:
        _serve(p, 200, 1)            # its next release (or lease renewal) is refused
    assert "\n" not in str(err.value)
    with LedgerStore.open(store_url, readonly=True) as store:
        assert store.n_records() == n
    with pytest.raises(ckpt.LeaseLost):
        p.checkpoint()
    q.close()
    assert verify_store(store_url) == []


def test_a_crashed_holder_on_this_host_is_taken_over_at_once(store_url, tmp_path):
    script = tmp_path / "holder.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        from dpledger.policies import online
        p = online("lazy-dp-ts", 3, store=sys.argv[1], seed=1, epsilon=0.5,
                   lease_seconds=3600)
        print("holding", flush=True)
        time.sleep(600)
    """))
    proc = subprocess.Popen([sys.executable, str(script), store_url], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    assert proc.stdout.readline().strip() == b"holding", proc.stderr.read().decode()[-2000:]
    with pytest.raises(ckpt.LeaseHeld, match="served by another live process"):
        online("lazy-dp-ts", 3, store=store_url, seed=1, epsilon=0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    q = online("lazy-dp-ts", 3, store=store_url, seed=1, epsilon=0.5)
    assert q.generation == 1
    q.close()


def _restore(url: str, saved) -> None:
    """Put back the checkpoints (and for SQLite the whole file) of an older copy."""
    if isinstance(saved, str):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(url + suffix):
                os.remove(url + suffix)
        shutil.copy(saved, url)
        for extra in os.listdir(os.path.dirname(saved)):
            if extra.startswith(os.path.basename(saved) + "."):       # the head anchor
                shutil.copy(os.path.join(os.path.dirname(saved), extra),
                            url + extra[len(os.path.basename(saved)):])
        return
    _sql(url, "DELETE FROM checkpoints",
         *[("INSERT INTO checkpoints(name, batches, data) VALUES (?, ?, ?)", row)
           for row in saved])


def test_a_restored_copy_never_repeats_a_generations_noise(store_url, tmp_path):
    """Serve generation 0 and close; back the store up; serve generation 1 and note its
    generator; restore the backup (SQLite: the file and its head anchor; PostgreSQL: the
    checkpoint rows, as a restore of the database would put them back) and open again: it is
    handed generation 1 a second time, and draws other noise (fresh entropy)."""
    p = online("lazy-dp-ts", 3, store=store_url, seed=5, epsilon=0.5)
    _serve(p, 40, 0)
    p.close()
    if store_url.startswith("postgresql://"):
        saved = _rows(store_url, "SELECT name, batches, data FROM checkpoints")
    else:
        saved = str(tmp_path / "backup.db")
        shutil.copy(store_url, saved)
        for f in os.listdir(tmp_path):
            if f.startswith("store.db.") and not f.endswith(("-wal", "-shm")):
                shutil.copy(tmp_path / f, saved + f[len("store.db"):])
    q = online("lazy-dp-ts", 3, store=store_url, seed=5, epsilon=0.5)
    assert q.generation == 1
    first = q.rng.bit_generator.state["state"]["state"]
    q.close()
    _restore(store_url, saved)
    r = online("lazy-dp-ts", 3, store=store_url, seed=5, epsilon=0.5, take_over=True)
    assert r.generation == 1
    assert r.rng.bit_generator.state["state"]["state"] != first
    r.close()


def test_threads_share_one_policy(tmp_path):
    """Four threads selecting and observing on one policy: every round is issued once, every
    ticket is observed once, the ledger holds each reward in one release and verifies."""
    p = online("adap-ucb", 4, store=tmp_path / "s.db", seed=3, epsilon=0.5)
    errors = []

    def work(k):
        rng = np.random.default_rng(k)
        try:
            for _ in range(150):
                tk = p.select()
                p.observe(tk, float(rng.random() < 0.5))
        except Exception as exc:          # noqa: BLE001 — reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert p.t == 600 and not p.outstanding
    assert p.store.status()["privacy"]["pure_epsilon"] == 0.5
    p.close()
    assert verify_store(tmp_path / "s.db") == []


def test_lease_arguments_are_checked(tmp_path):
    for bad in (0, -1, float("nan"), "x"):
        with pytest.raises(DpledgerError, match="lease_seconds"):
            online("lazy-dp-ts", 3, store=tmp_path / "s.db", lease_seconds=bad)
    with pytest.raises(DpledgerError, match="take_over"):
        online("lazy-dp-ts", 3, store=tmp_path / "s.db", take_over="yes")


def test_status_names_each_served_run(tmp_path, capsys):
    from dpledger.cli import main
    url = str(tmp_path / "s.db")
    for _ in range(2):
        p = online("lazy-dp-ts", 3, store=url, seed=1, epsilon=0.5)
        _serve(p, 20, 0)
        p.close()
    p = online("lazy-dp-ts", 3, store=url, seed=1, epsilon=0.5)
    assert main(["ledger", "status", url, "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    run = st["served_runs"][0]
    assert (run["run"], run["generation"], run["entropy"]) == (0, 2, "seed+os")
    assert run["lease"]["pid"] == os.getpid()
    assert st["head_anchor"]["path"] == url + ".heads"
    p.close()
    assert main(["ledger", "status", url]) == 0
    out = capsys.readouterr().out
    assert "served run 0: generation 2 (noise from the seed and fresh OS entropy); lease free" \
        in out
