"""Progress bars on stderr for long work (issue 13): simulation rounds, sweep cells, audit trials.

One bar type, :class:`Bar`, drawn by tqdm.  Its clock starts at the *first tick*, not at
creation: whatever happens before the first unit of work is reported — numba compiling the
kernels on a first run, ~30 s — is excluded from the rate and the ETA (the count at the first
tick is tqdm's ``initial``, which tqdm leaves out of the rate; ``smoothing=0`` makes the rate
the plain average since then, so the ETA is (total − n)·elapsed/(n − initial)).  A bar appears
only after ``delay`` seconds of work (short runs print nothing), goes to stderr only (never to
stdout, so ``--json`` output stays clean), and is not created at all when ``quiet``.  On a
stderr that is not a terminal (CI logs) it redraws at most every 10 s, and work longer than
``delay`` ends with one final line (totals, elapsed, rate).
"""
from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import sys
import tempfile
import threading
from typing import Callable, TextIO


class Bar:
    """A tqdm bar of ``total`` ``unit`` s whose clock starts at the first tick (see module doc).

    ``set(n)`` moves to an absolute count, ``add(k)`` by k; both are safe to call from a
    progress thread.  ``clock`` (tests) replaces tqdm's time source."""

    def __init__(self, total: int, unit: str, *, quiet: bool = False, desc: str | None = None,
                 file: TextIO | None = None, delay: float = 1.0,
                 clock: Callable[[], float] | None = None):
        self.total, self.unit, self.quiet, self.desc = int(total), unit, quiet, desc
        self.file, self.delay, self.clock = file, delay, clock
        self.n = 0
        self.bar = None
        self._lock = threading.Lock()

    def _open(self, n: int) -> None:
        from tqdm import tqdm
        out = self.file if self.file is not None else sys.stderr
        tty = hasattr(out, "isatty") and out.isatty()
        self.bar = tqdm(total=self.total, initial=n, unit=self.unit, unit_scale=True,
                        desc=self.desc, file=out, smoothing=0, delay=self.delay,
                        mininterval=0.5 if tty else 10.0, dynamic_ncols=tty, leave=True)
        if self.clock is not None:          # tests: tqdm reads time through _time
            self.bar._time = self.clock
            self.bar.start_t = self.bar.last_print_t = self.clock()

    def set(self, n: int, postfix: str | None = None) -> None:
        if self.quiet:
            return
        with self._lock:
            n = min(int(n), self.total)
            if n <= self.n and postfix is None:
                return
            if self.bar is None:
                if n <= 0:
                    return
                self.n = n
                self._open(n)               # the first tick: the clock starts here
            elif n > self.n:
                self.bar.update(n - self.n)
                self.n = n
            if postfix is not None:
                self.bar.set_postfix_str(postfix, refresh=False)

    def add(self, k: int = 1, postfix: str | None = None) -> None:
        self.set(self.n + int(k), postfix)

    def rate_eta(self) -> tuple[float | None, float | None]:
        """(units per second, seconds left) as the bar computes them; None before two ticks."""
        if self.bar is None:
            return None, None
        d = self.bar.format_dict
        done = d["n"] - d["initial"]
        if not d["elapsed"] or done <= 0:
            return None, None
        rate = done / d["elapsed"]
        return rate, (d["total"] - d["n"]) / rate

    def line(self) -> str:
        """The bar's current text (what it draws)."""
        return "" if self.bar is None else self.bar.format_meter(**self.bar.format_dict)

    def close(self) -> None:
        with self._lock:
            if self.bar is not None:
                b = self.bar
                now = b._time()
                if b.last_print_t < b.start_t + b.delay and now - b.start_t >= b.delay:
                    # longer than ``delay`` but never drawn (a non-terminal stderr redraws only
                    # every 10 s): let tqdm draw the final line, so logs get the totals
                    b.last_print_t = now
                b.close()
                self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class SimulationProgress:
    """Progress of ``dpledger run``: rounds over all runs (``rounds``, called by the simulator's
    progress thread with the rounds done so far, inside runs too) and runs done (``__call__``,
    the simulator's per-run callback)."""

    def __init__(self, horizon: int, runs: int, quiet: bool = False, **bar_args):
        self.runs, self.done = int(runs), 0
        self.bar = Bar(int(horizon) * int(runs), "round", quiet=quiet, **bar_args)

    def __call__(self, n: int) -> None:
        self.done += int(n)

    def rounds(self, n: int) -> None:
        self.bar.set(n, postfix=f"runs {self.done}/{self.runs}" if self.runs > 1 else None)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class CompileNotice:
    """One line on stderr while numba compiles for more than ``delay`` seconds (issue 25 §2):
    a first run compiles the kernels for 10–45 s with nothing else to show.

    It listens to numba's ``numba:compile`` events, which fire only when a function is really
    compiled (never when it is loaded from the on-disk cache), and times the outermost one.
    Two messages: kernels numba caches (``cache=True``) are compiled once — "first run only";
    the audits' trial loops take the policy's kernel as an argument, which numba cannot cache,
    so an audit compiles them each time — said as such.  Each is printed once per command: the
    pool workers a command forks inherit the notice and its ``group`` token, and the first
    process to create the message's marker file (``O_CREAT | O_EXCL`` in the temporary folder)
    is the one that prints it — with two workers compiling at once the line was printed twice.
    The process that made the notice removes its markers at exit."""

    CACHED = ("dpledger: compiling the numba kernels (first run only: they are cached for later "
              "runs) …")
    UNCACHED = ("dpledger: compiling the audit's trial loop for this policy (each audit: numba "
                "cannot cache a loop that takes the policy's kernel as an argument) …")

    def __init__(self, delay: float = 1.0, file: TextIO | None = None):
        self.delay, self.file = delay, file
        self.depth = 0
        self.timer: threading.Timer | None = None
        self.said: set[str] = set()
        self._lock = threading.Lock()
        self.owner = os.getpid()
        self.group = f"{self.owner}-{secrets.token_hex(8)}"
        atexit.register(self._remove_markers)

    def start(self, cached: bool) -> None:
        with self._lock:
            self.depth += 1
            if self.depth == 1:
                msg = self.CACHED if cached else self.UNCACHED
                if msg not in self.said:
                    self.timer = threading.Timer(self.delay, self._say, (msg,))
                    self.timer.daemon = True
                    self.timer.start()

    def end(self) -> None:
        with self._lock:
            self.depth = max(0, self.depth - 1)
            if self.depth == 0 and self.timer is not None:
                self.timer.cancel()
                self.timer = None

    def _say(self, msg: str) -> None:
        with self._lock:
            if self.depth == 0 or msg in self.said:
                return
            self.said.add(msg)
        if not self._claim(msg):
            return
        out = self.file if self.file is not None else sys.stderr
        out.write(msg + "\n")
        out.flush()


    def _claim(self, msg: str) -> bool:
        """True for the first process of this command to say ``msg`` (see the class doc); True
        also when the temporary folder cannot be written (a repeated line beats a lost one)."""
        kind = "cached" if msg == self.CACHED else "uncached"
        path = os.path.join(tempfile.gettempdir(), f"dpledger-compile-notice-{self.group}-{kind}")
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return False
        except OSError:
            return True
        return True

    def _remove_markers(self) -> None:
        if os.getpid() != self.owner:
            return
        for kind in ("cached", "uncached"):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(tempfile.gettempdir(),
                                       f"dpledger-compile-notice-{self.group}-{kind}"))


_NOTICE: CompileNotice | None = None


def announce_compilation(delay: float = 1.0) -> CompileNotice:
    """Install (once per process) the :class:`CompileNotice` listener on numba's compile
    events; returns it."""
    global _NOTICE
    if _NOTICE is not None:
        return _NOTICE
    from numba.core import event
    from numba.core.caching import NullCache
    notice = CompileNotice(delay)

    class _Listener(event.Listener):
        def on_start(self, ev):
            d = (ev.data or {}).get("dispatcher")
            notice.start(cached=not isinstance(getattr(d, "_cache", None), NullCache))

        def on_end(self, ev):
            notice.end()

    event.register("numba:compile", _Listener())
    _NOTICE = notice
    return notice


__all__ = ["Bar", "SimulationProgress", "CompileNotice", "announce_compilation"]
