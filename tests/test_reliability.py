"""Issue 25: no input exhausts the machine, Ctrl-C answers, first-use compilation is announced.

* Memory (§1): the five inputs that grew without bound (killed at 6–10 GiB) run in one real
  subprocess under an address-space limit (``resource.setrlimit``) and must each end in one
  line, exit 2, within seconds, naming the estimate — not the allocator's MemoryError.
* Ctrl-C (§2): a real SIGINT to a subprocess in the middle of a long run (one worker; two
  worker processes, the signal sent to the whole process group as a terminal's Ctrl-C is) and a
  long audit (two worker threads): exit 130 within a few seconds, one line, nothing written.
* The pieces behind them, in process: the memory rule, the sink's stop slot, the chunked audit
  calls (same trials as one call), the compile notice.
"""
from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest

from dpledger.errors import DpledgerError

LINUX = sys.platform.startswith("linux")
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


# ---- §1: memory, under a real limit ------------------------------------------------------------

# (argv, what the one line must say); {D} is the subprocess's scratch folder
MEMORY_CASES = [
    (["run", "ucb1", "--runs", "1e9"], "this simulation needs about"),
    (["audit", "lazy-dp-ts", "--horizon", "1e9", "--trials", "100"], "this audit needs about"),
    (["audit", "laplace:eps=1", "--trials", "1e9"], "this audit needs about"),
    (["show", "{D}/run.json", "--ledger", "/dev/urandom"], "is a character device"),
    (["run", "ucb1", "--env", "table", "--table", "/dev/zero"], "is a character device"),
]

_DRIVER = textwrap.dedent("""
    import contextlib, io, json, os, resource, sys, time
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from dpledger.cli import main
    out = []
    for argv in json.loads(sys.argv[2]):
        err = io.StringIO()
        t0 = time.monotonic()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        out.append({"code": code, "err": err.getvalue(), "s": time.monotonic() - t0})
    print(json.dumps(out))
""")


@pytest.mark.skipif(not LINUX, reason="/dev/zero, /dev/urandom and RLIMIT_AS as on Linux")
def test_unbounded_inputs_refused_under_a_memory_limit(tmp_path):
    """Each of issue 25's five inputs, under a 3 GiB address-space limit: one line, exit 2,
    within seconds, the estimate (or the device) named, nothing written."""
    from dpledger.cli import main
    assert main(["run", "lazy-dp-ts", "--horizon", "300", "--runs", "2", "--quiet",
                 "--out", str(tmp_path / "run.json")]) == 0
    work = tmp_path / "work"
    work.mkdir()
    cases = [[a.replace("{D}", str(tmp_path)) for a in argv] + (
        ["--out", str(work / "out.json")] if argv[0] in ("run", "audit") else [])
        for argv, _ in MEMORY_CASES]
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", _DRIVER, str(3 << 30), json.dumps(cases)],
                       capture_output=True, text=True, env=ENV, cwd=work, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    results = json.loads(p.stdout.strip().splitlines()[-1])
    for (argv, fragment), r in zip(MEMORY_CASES, results, strict=True):
        lines = r["err"].strip().splitlines()
        assert r["code"] == 2, (argv, r)
        assert len(lines) == 1 and "Traceback" not in r["err"], (argv, r["err"])
        assert fragment in lines[0] and "out of memory" not in lines[0], (argv, lines[0])
        assert r["s"] < 20, (argv, r["s"])          # seconds (mostly imports), not minutes
    assert os.listdir(work) == []
    assert time.monotonic() - t0 < 120


def test_memory_refusals_say_what_fits(monkeypatch):
    """The one rule: the estimate, what is available, and what would fit, in the user's options."""
    import dpledger.resources as R
    from dpledger.audits import mechanisms as M
    from dpledger.audits import policy as AP
    from dpledger.policies.registry import make_policy
    monkeypatch.setattr(R, "available_memory", lambda: 1 << 30)
    with pytest.raises(DpledgerError, match=r"needs about .* more than the 1.0 GB available; "
                                            r"use fewer --trials .*at most \d+ fit"):
        M.check_memory([(make_release(), 1)], 10 ** 8)
    est = M.check_memory([(make_release(), 1)], 10 ** 6)
    assert est["bytes"] < 1 << 30
    with pytest.raises(DpledgerError, match="use a smaller --horizon"):
        AP.check_memory(make_policy("lazy-dp-ts"), 10 ** 8, 2, 100, "blackbox")
    with pytest.raises(DpledgerError, match=r"use fewer --trials .*at most (\d+) fit"):
        AP.check_memory(make_policy("lazy-dp-ts"), 1000, 2, 10 ** 8, "blackbox")
    # what "fits" really fits, and one more trial per side does not
    fits = R.largest_fitting(AP.memory_estimate(make_policy("lazy-dp-ts"), 1000, 2, 0,
                                                "blackbox")["per_trial"],
                             AP.memory_estimate(make_policy("lazy-dp-ts"), 1000, 2, 0,
                                                "blackbox")["bytes"], 1 << 30)
    AP.check_memory(make_policy("lazy-dp-ts"), 1000, 2, fits, "blackbox")
    with pytest.raises(DpledgerError):
        AP.check_memory(make_policy("lazy-dp-ts"), 1000, 2, fits + 1, "blackbox")


def make_release():
    from dpledger.accounting.releases import LaplaceRelease
    return LaplaceRelease(scale=1.0)


def test_available_memory_sees_the_rlimit():
    """Under RLIMIT_AS the room left is at most the limit minus what the process maps."""
    if not LINUX:
        pytest.skip("RLIMIT_AS and /proc as on Linux")
    code = textwrap.dedent("""
        import resource
        from dpledger.resources import available_memory, _proc_status
        size = _proc_status()["VmSize"]
        resource.setrlimit(resource.RLIMIT_AS, (size + (200 << 20), size + (200 << 20)))
        print(available_memory())
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert 0 < int(p.stdout) <= 200 << 20


def test_sequential_batches_are_bounded():
    """Later batches of a sequential audit are drawn in pieces of at most ``batch`` trials, and
    the counts equal those of whole batches (trials are a function of their index)."""
    from dpledger.audits.stats import sequential_audit
    sizes = []

    def sample(side, start, n):
        sizes.append(n)
        rng = np.random.default_rng([side, 7])
        return rng.normal(side, 1.0, start + n)[start:]

    a = sequential_audit(sample, first=100, max_trials=3200, target=None, batch=64)
    assert max(sizes[2:]) <= 64
    sizes.clear()
    b = sequential_audit(sample, first=100, max_trials=3200, target=None, batch=10 ** 6)
    assert (a.final.k0, a.final.k1, a.final.n0, a.final.n1) == \
        (b.final.k0, b.final.k1, b.final.n0, b.final.n1)


# ---- §2: Ctrl-C ---------------------------------------------------------------------------------

def _started_driver(target: str, argv: list[str]) -> str:
    """A child that prints "started" when ``target`` (module:function) is first entered, then
    runs the CLI: the parent signals only once the long work is under way."""
    mod, fn = target.split(":")
    # The child stands for a terminal's foreground process: SIGINT at its default handler even
    # when the suite itself was started with SIGINT ignored (a background job of a
    # non-interactive shell inherits SIG_IGN, and Python then installs no KeyboardInterrupt).
    return textwrap.dedent(f"""
        import sys, importlib, signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        m = importlib.import_module({mod!r})
        orig = getattr(m, {fn!r})
        def wrapped(*a, **k):
            print("started", flush=True)
            return orig(*a, **k)
        setattr(m, {fn!r}, wrapped)
        from dpledger.cli import main
        sys.exit(main({argv!r}))
    """)


def warm_kernels(argv, tmp_path) -> None:
    """Run ``argv`` small first (a short horizon, one run, one worker, few trials), so that its
    kernels are in numba's on-disk cache: on a clean checkout the timed process would otherwise
    spend the signal's seconds compiling (a compile cannot be interrupted), which is not what
    the tests measure."""
    small = {"--horizon": "400", "--runs": "1", "--workers": "1", "--trials": "200"}
    warm = list(argv)
    for i, a in enumerate(warm[:-1]):
        if a in small:
            warm[i + 1] = small[a]
    subprocess.run([sys.executable, "-m", "dpledger", *warm, "--quiet", "--out",
                    str(tmp_path / "warm.json")], env=ENV, cwd=tmp_path, capture_output=True,
                   timeout=900)


def _interrupt(tmp_path, target, argv, group: bool, settle: float = 2.0):
    if argv and argv[0] in ("run", "audit"):
        warm_kernels([a for a in argv if a != "--quiet"], tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    argv = argv + ["--out", str(out / "result.json")]
    p = subprocess.Popen([sys.executable, "-c", _started_driver(target, argv)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                         cwd=out, start_new_session=group)
    try:
        line = p.stdout.readline()
        assert line.strip() == "started", (line, p.stderr.read() if p.poll() is not None else "")
        time.sleep(settle)                      # well inside the compiled loops
        assert p.poll() is None, "finished before the signal"
        t0 = time.monotonic()
        if group:
            os.killpg(p.pid, signal.SIGINT)     # what a terminal's Ctrl-C does
        else:
            p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, err, elapsed, out


@pytest.mark.skipif(not LINUX, reason="POSIX signals and process groups")
@pytest.mark.parametrize("workers,group", [(1, False), (2, True)])
def test_sigint_stops_a_long_run(tmp_path, workers, group):
    """A run of 1e9 rounds per run (minutes of compiled loop) stops within seconds of SIGINT:
    exit 130, one line, nothing written (measured ~0.3 s on the 2-core machine, most of it the
    interpreter's exit)."""
    code, err, elapsed, out = _interrupt(
        tmp_path, "dpledger.policies.simulator:simulate",
        ["run", "ucb1", "--horizon", "1e9", "--runs", str(workers), "--workers", str(workers),
         "--quiet"], group)
    assert code == 130, err
    assert err.strip().splitlines()[-1].endswith("interrupted (no file is left half-written)")
    assert "Traceback" not in err
    assert elapsed < 5.0, elapsed
    assert os.listdir(out) == []


@pytest.mark.skipif(not LINUX, reason="POSIX signals and process groups")
def test_sigint_stops_a_long_audit(tmp_path):
    """An audit of 1e6 trials per side at T = 1e4 (tens of minutes) in two worker threads stops
    within seconds of a process-group SIGINT."""
    code, err, elapsed, out = _interrupt(
        tmp_path, "dpledger.audits.policy:run_trials",
        ["audit", "lazy-dp-ts", "--trials", "1000000", "--horizon", "10000", "--workers", "2",
         "--quiet"], group=True, settle=3.0)
    assert code == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert elapsed < 5.0, elapsed
    assert os.listdir(out) == []


def test_stop_slot_stops_a_compiled_run():
    """A set stop slot makes a sink's kernel raise Stopped at its next flush (2^15 rounds), and
    the simulator's worker thread turns a KeyboardInterrupt into a stop of the run."""
    from dpledger.interrupt import Stopped, clear_stop, request_stop
    from dpledger.policies import environments as E
    from dpledger.policies.registry import make_policy
    from dpledger.policies.sink import SLOT_STOP, make_sink
    from dpledger.policies.simulator import run_generator
    pol = make_policy("ucb1")
    env = E.bernoulli([0.6, 0.5], 0, 1)
    sink = make_sink(2)
    sink[5, SLOT_STOP] = 1
    t0 = time.monotonic()
    with pytest.raises(Stopped):
        pol.run_one(run_generator(0, 0), env.as_tuple(), 10 ** 9, sink=sink)
    assert time.monotonic() - t0 < 1.0
    try:
        request_stop()          # a sink made after the request is stopped at once
        fresh = make_sink(2)
        assert fresh[5, SLOT_STOP] == 1
        reused = make_sink(2, out=np.zeros_like(fresh))
        assert reused[5, SLOT_STOP] == 1
    finally:
        clear_stop()
    assert make_sink(2)[5, SLOT_STOP] == 0


def test_audit_calls_in_pieces_give_the_same_trials(monkeypatch):
    """Chunks played in compiled calls of a few trials each (so that Ctrl-C is heard between
    them) give exactly the trials of one call per chunk."""
    import dpledger.audits.policy as AP
    from dpledger.policies.registry import make_policy
    outs = []
    for rounds in (1 << 40, 700):
        monkeypatch.setattr(AP, "ROUNDS_PER_CALL", rounds)
        res = [AP.audit_policy(make_policy(n), trials=300, mode=m, T=200, seed=5).to_json()
               for n, m in (("lazy-dp-ts", "blackbox"), ("dp-ts", "whitebox"),
                            ("adap-ucb", "blackbox"))]
        outs.append(json.dumps(res, sort_keys=True))
    assert outs[0] == outs[1]


def test_compile_notice_only_when_compiling_long():
    """The notice is printed once, only while a compilation lasts longer than its delay, and
    says "first run only" for cached kernels, "each audit" for the uncached trial loops."""
    import io
    from dpledger.progress import CompileNotice
    buf = io.StringIO()
    n = CompileNotice(delay=0.05, file=buf)
    n.start(cached=True)
    n.end()                         # quick: nothing
    time.sleep(0.1)
    assert buf.getvalue() == ""
    n.start(cached=True)
    n.start(cached=True)            # nested compilations: one notice
    time.sleep(0.2)
    n.end()
    n.end()
    assert buf.getvalue().count("first run only") == 1
    n.start(cached=True)
    time.sleep(0.2)
    n.end()
    assert buf.getvalue().count("first run only") == 1      # once per process
    n.start(cached=False)
    time.sleep(0.2)
    n.end()
    assert "each audit" in buf.getvalue()


def test_compile_notice_on_a_cold_cache(tmp_path):
    """A function numba really compiles (here one defined in the child, never cached) makes the
    CLI's listener print one notice on stderr."""
    code = textwrap.dedent("""
        import sys, time
        from dpledger.progress import announce_compilation
        notice = announce_compilation(delay=0.0)
        from numba import njit
        @njit(cache=False)
        def f(x):
            return x + 1
        f(1)
        time.sleep(0.2)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                       timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "compiling" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_compile_notice_once_per_command_across_forked_workers(tmp_path):
    """Forked pool workers inherit the notice: when the parent and a worker both compile for
    long, the line is printed once (it was printed by each process); the marker is removed at
    exit."""
    code = textwrap.dedent("""
        import glob, os, sys, tempfile, time
        from dpledger.progress import announce_compilation
        notice = announce_compilation(delay=0.0)
        pid = os.fork()
        notice.start(cached=True)
        time.sleep(0.3)
        notice.end()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        pattern = os.path.join(tempfile.gettempdir(), f"dpledger-compile-notice-{notice.group}-*")
        print(len(glob.glob(pattern)), notice.group)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                       timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("compiling the numba kernels") == 1, p.stderr
    n, group = p.stdout.split()
    assert n == "1"                                  # the marker exists while the command runs
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"dpledger-compile-notice-{group}-*"))
