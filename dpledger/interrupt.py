"""Ctrl-C that answers within about a second wherever long loops run (issue 25 §2).

Python turns SIGINT into KeyboardInterrupt in the *main* thread, between bytecodes.  A compiled
(numba) loop does not return to Python while it runs, so a run of 1e9 rounds or a batch of
trials called from the main thread hears Ctrl-C only when it ends (58–70 s were measured).
Three pieces make every long loop stop within one of its chunks:

* **a stop request** — :func:`request_stop` sets a process-wide event, and the stop slot of
  every array registered with :func:`watch` (the action sinks of running simulations: the
  compiled kernels read the slot at each flush, every 2^15 rounds, and raise :class:`Stopped`).
  Python loops between chunks call :func:`raise_if_stopped`.
* **the main thread free to hear the signal** — :func:`in_worker_thread` runs a piece of
  compiled work in a thread while the main thread waits; on KeyboardInterrupt it requests the
  stop, waits for the work to end (one chunk) and re-raises KeyboardInterrupt.
* **pools** — :func:`interruptible_pool` gives a thread or process pool whose workers stop the
  same way: threads see the event; processes ignore SIGINT themselves (a terminal's Ctrl-C
  reaches the whole process group, and would print a traceback per worker) and a watcher
  thread in each turns the parent's shared flag into a stop request there.

Whatever stops, nothing is half-written: every output is written to a temporary name and
renamed (:func:`dpledger.accounting.schema.write_json_atomic`), and the CLI exits 130.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import weakref
from typing import Any, Callable, Iterator

_STOP = threading.Event()
_WATCHED: list[tuple[weakref.ref, tuple]] = []
_LOCK = threading.Lock()
_POLL = 0.1                     # seconds between looks at a worker thread once stopping


class Stopped(Exception):
    """Raised by a loop (compiled or not) that saw a stop request; the waiting main thread
    turns it back into KeyboardInterrupt."""


def watch(array: Any, index: tuple) -> None:
    """Set ``array[index] = 1`` on the next stop request (at once if one is pending): how a
    compiled loop that reads ``array[index]`` between chunks learns of Ctrl-C."""
    with _LOCK:
        _WATCHED[:] = [(r, i) for r, i in _WATCHED if r() is not None]
        _WATCHED.append((weakref.ref(array), index))
        if _STOP.is_set():
            array[index] = 1


def stop_slot() -> Any:
    """A one-element int64 array that becomes 1 on a stop request (:func:`watch`): the flag a
    compiled loop without a sink (the contextual kernels) reads every round."""
    import numpy as np
    slot = np.zeros(1, dtype=np.int64)
    watch(slot, (0,))
    return slot


def request_stop() -> None:
    """Ask every loop of this process to stop at its next check."""
    with _LOCK:
        _STOP.set()
        for ref, index in _WATCHED:
            array = ref()
            if array is not None:
                array[index] = 1


def clear_stop() -> None:
    """Forget a handled stop request (the next command in the same process runs normally)."""
    with _LOCK:
        _STOP.clear()
        _WATCHED[:] = [(r, i) for r, i in _WATCHED if r() is not None]


def stop_requested() -> bool:
    return _STOP.is_set()


def raise_if_stopped() -> None:
    """The check Python loops make between chunks."""
    if _STOP.is_set():
        raise Stopped()


def in_worker_thread(work: Callable[[], Any]) -> Any:
    """``work()``, run in a thread while this (main) thread waits, so that Ctrl-C is heard while
    compiled code runs: on KeyboardInterrupt the stop is requested, the work ends at its next
    check, and KeyboardInterrupt is raised here.  Off the main thread (no signal arrives
    there) ``work()`` simply runs."""
    if threading.current_thread() is not threading.main_thread():
        return work()
    box: dict[str, Any] = {}

    def target():
        try:
            box["value"] = work()
        except BaseException as exc:        # re-raised in the waiting thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="dpledger-work", daemon=True)
    worker.start()
    interrupted = None
    try:
        while worker.is_alive():
            try:
                # until a signal, one blocking join (SIGINT interrupts it on POSIX): a join
                # with a timeout wakes this thread, and takes the GIL, every time it expires —
                # 14 % slower for 2e4 short runs of adap-ucb (1.47 s against 1.29 s)
                worker.join(None if interrupted is None else _POLL)
            except KeyboardInterrupt:
                interrupted = interrupted or time.monotonic()
                request_stop()
            if interrupted and time.monotonic() - interrupted > 2 * _GRACE:
                # busy where no check is made (numba compiling a kernel for its first use,
                # 10–45 s): the work is abandoned — it writes nothing, and as a daemon thread
                # it ends with the process
                break
    finally:
        if interrupted:
            clear_stop()
    if interrupted:
        raise KeyboardInterrupt
    if "error" in box:
        err = box["error"]
        raise (KeyboardInterrupt() if isinstance(err, Stopped) else err)
    return box.get("value")


_GRACE = 1.0                    # seconds a pool process is given to stop at its next check


def _child_init(flag, initializer, initargs) -> None:
    """A pool process: SIGINT is the parent's to handle; the parent's ``flag`` (an event) becomes
    a stop request here (a daemon thread waits on it).  A process that has not
    stopped :data:`_GRACE` seconds later is busy where no check is made — numba compiling a
    kernel for its first use takes 10–45 s — and exits: the parent has given up its results,
    and a pool process writes no file."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def look():
        flag.wait()         # blocks without waking (a polling thread slowed the work 14 %)
        request_stop()
        threading.Event().wait(_GRACE)
        os._exit(130)

    threading.Thread(target=look, name="dpledger-stop-watch", daemon=True).start()
    if initializer is not None:
        initializer(*initargs)


@contextlib.contextmanager
def interruptible_pool(kind: str, max_workers: int, initializer: Callable | None = None,
                       initargs: tuple = ()) -> Iterator[Any]:
    """A ``concurrent.futures`` pool of ``kind`` "thread" or "process" whose workers stop at
    their next check when the block is left by an exception — KeyboardInterrupt while the
    caller waits on a future, or a task's error: pending tasks are cancelled, running ones
    asked to stop (threads: :func:`request_stop`; processes: a shared flag, see
    :func:`_child_init`), and the pool is joined before the exception goes on."""
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
    if kind == "thread":
        flag = None
        pool = ThreadPoolExecutor(max_workers=max_workers)
    else:
        import multiprocessing
        context = multiprocessing.get_context()
        flag = context.Event()
        pool = ProcessPoolExecutor(max_workers=max_workers, mp_context=context,
                                   initializer=_child_init,
                                   initargs=(flag, initializer, initargs))
    try:
        yield pool
    except BaseException:
        if flag is None:
            request_stop()
        else:
            flag.set()
        try:
            pool.shutdown(wait=True, cancel_futures=True)
        finally:
            if flag is None:
                clear_stop()
        raise
    else:
        pool.shutdown(wait=True)


__all__ = ["Stopped", "watch", "request_stop", "clear_stop", "stop_requested",
           "raise_if_stopped", "stop_slot", "in_worker_thread", "interruptible_pool"]
