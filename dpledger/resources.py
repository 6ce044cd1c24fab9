"""What the machine can give a command, asked before any work that scales with user input.

One rule for every command (issue 25 §1): estimate the bytes a piece of work will hold, compare
them with the memory this process can still get, and refuse — one line naming both numbers and
what would fit — when they exceed it.  :func:`check_fits` is that rule; the estimates live
beside the work they describe (``policies.simulator.memory_estimate``,
``audits.policy.memory_estimate``, ``audits.mechanisms.memory_estimate``,
``dpledger.inputs`` for files).

The memory available is the smallest of: the system's ``MemAvailable`` (Linux; psutil
elsewhere), the room left under the process's address-space and data limits
(``RLIMIT_AS`` − VmSize, ``RLIMIT_DATA`` − VmData: what ``ulimit -v`` / ``resource.setrlimit``
impose, and what a test sets), and the room left in its memory cgroup (v2 ``memory.max`` −
``memory.current``; v1 ``memory.limit_in_bytes`` − ``memory.usage_in_bytes``: a container's
limit).  Unknown everywhere → None, and nothing is refused (the allocation itself still fails
with one line, ``cli.main``'s MemoryError handler).
"""
from __future__ import annotations


from dpledger.errors import DpledgerError


def _proc_status() -> dict[str, int]:
    """VmSize, VmData, … of /proc/self/status in bytes (empty where there is no /proc)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                    out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
        return int(psutil.virtual_memory().available)
    except Exception:       # psutil absent or unsupported platform: no estimate from it
        return None


def _rlimit_room(status: dict[str, int]) -> int | None:
    """Bytes left under RLIMIT_AS and RLIMIT_DATA (None: no finite limit, or not POSIX)."""
    try:
        import resource
    except ImportError:         # pragma: no cover - not POSIX
        return None
    room = None
    for limit, used in ((resource.RLIMIT_AS, status.get("VmSize")),
                        (getattr(resource, "RLIMIT_DATA", None), status.get("VmData"))):
        if limit is None or used is None:
            continue
        soft, _ = resource.getrlimit(limit)
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        left = max(0, int(soft) - int(used))
        room = left if room is None else min(room, left)
    return room


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_room() -> int | None:
    """Bytes left in this process's memory cgroup (None: no limit found)."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":                               # cgroup v2
            base = "/sys/fs/cgroup" + path.rstrip("/")
            limit, used = _read_int(base + "/memory.max"), _read_int(base + "/memory.current")
        elif "memory" in controllers.split(","):            # cgroup v1
            base = "/sys/fs/cgroup/memory"
            for cand in (base + path.rstrip("/"), base):
                limit = _read_int(cand + "/memory.limit_in_bytes")
                used = _read_int(cand + "/memory.usage_in_bytes")
                if limit is not None:
                    break
        else:
            continue
        # v1 writes "no limit" as a page-rounded 2^63 − 1
        if limit is not None and used is not None and limit < 1 << 60:
            return max(0, limit - used)
    return None


def available_memory() -> int | None:
    """Bytes this process can still allocate: the smallest of the system's available memory,
    the room under its rlimits and the room in its memory cgroup (see the module docstring);
    None when none is known."""
    known = [v for v in (_meminfo_available(), _rlimit_room(_proc_status()), _cgroup_room())
             if v is not None]
    return min(known) if known else None


def fmt_bytes(n: int | float) -> str:
    """Bytes in the largest unit that keeps a number ≥ 1 (1.5 GB, 300.0 MB, 12 B)."""
    n = float(n)
    for unit, size in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def check_fits(what: str, need: int, fix: str, available: int | None = None) -> int | None:
    """Refuse ``what`` (e.g. "this audit") when ``need`` bytes exceed the memory available
    (``available``, default :func:`available_memory`): one DpledgerError naming both numbers
    and ``fix`` (what would fit, in the user's options).  Returns the memory available (None:
    unknown, nothing refused)."""
    avail = available_memory() if available is None else int(available)
    if avail is not None and int(need) > avail:
        raise DpledgerError(f"{what} needs about {fmt_bytes(need)}, more than the "
                            f"{fmt_bytes(avail)} available; {fix}")
    return avail


def largest_fitting(per_unit: int, fixed: int, available: int | None) -> int | None:
    """The largest count n with fixed + n·per_unit ≤ available (None: memory unknown)."""
    if available is None:
        return None
    return max(0, (int(available) - int(fixed)) // max(1, int(per_unit)))


__all__ = ["available_memory", "check_fits", "fmt_bytes", "largest_fitting"]
