"""The package's kernel cache notices changes to other modules (dpledger/_jit.py).

numba keys a cached kernel on its own file; a kernel that inlines or calls a compiled function of
another module kept its stale machine code after that module changed (it once made a contextual
audit report a mismatch the source no longer had).  Here, in fresh processes like a user's
successive commands: a cached kernel calls a helper of another module; the helper changes and
the kernel's file does not; the next process must run the new helper (compiled afresh), and the
one after must load it from the cache again.  The same sequence with numba's own ``njit`` is run
beside as the control: it shows the stale value, so the check is not vacuous on this numba.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dpledger import _jit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUN = """
import os, sys
sys.path.insert(0, {folder!r})
if {ours!r}:
    from dpledger import _jit
    _jit.register_root(os.path.join({folder!r}, "pk"))
import pk.kern as k
value = k.f()
print(value, sum(k.f.stats.cache_hits.values()), sum(k.f.stats.cache_misses.values()))
"""


def _write(folder, ours: bool, value: int, kernel: bool) -> None:
    imp = "from dpledger._jit import njit" if ours else "from numba import njit"
    with open(os.path.join(folder, "pk", "helper.py"), "w") as fh:
        fh.write(f"{imp}\n\n@njit(cache=True, inline='always')\ndef h():\n    return {value}\n")
    if kernel:
        with open(os.path.join(folder, "pk", "kern.py"), "w") as fh:
            fh.write(f"{imp}\nfrom pk.helper import h\n\n@njit(cache=True)\n"
                     "def f():\n    return h()\n")


def _run(folder, ours: bool) -> tuple[int, int, int]:
    out = subprocess.run([sys.executable, "-c", RUN.format(folder=str(folder), ours=ours)],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    value, hits, misses = map(int, out.stdout.split())
    return value, hits, misses


@pytest.mark.parametrize("ours", [True, False], ids=["dpledger-njit", "numba-njit-control"])
def test_cached_kernel_follows_a_changed_helper_module(tmp_path, ours):
    assert _jit.INSTALLED
    (tmp_path / "pk").mkdir()
    (tmp_path / "pk" / "__init__.py").write_text("")
    _write(tmp_path, ours, 1, kernel=True)
    assert _run(tmp_path, ours) == (1, 0, 1)              # compiled, then cached
    assert _run(tmp_path, ours) == (1, 1, 0)              # loaded from the cache
    kern = tmp_path / "pk" / "kern.py"
    stamp = os.stat(kern).st_mtime_ns
    _write(tmp_path, ours, 2, kernel=False)                # only the helper changes
    assert os.stat(kern).st_mtime_ns == stamp
    if ours:
        assert _run(tmp_path, ours) == (2, 0, 1)          # compiled afresh
        assert _run(tmp_path, ours) == (2, 1, 0)          # and cached again
    else:
        got = _run(tmp_path, ours)
        if got[0] == 2:
            pytest.skip("this numba notices the helper's change itself")
        assert got == (1, 1, 0)                           # numba alone: the stale kernel


def test_fingerprint_covers_compiled_modules_only(tmp_path):
    (tmp_path / "a.py").write_text("from dpledger._jit import njit\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    root = str(tmp_path)
    _jit.register_root(root)
    first = _jit.package_fingerprint(root)
    (tmp_path / "b.py").write_text("x = 2\n")              # no compiled code: same stamp
    _jit._fingerprints.clear()
    assert _jit.package_fingerprint(root) == first
    (tmp_path / "a.py").write_text("from dpledger._jit import njit\n# changed\n")
    _jit._fingerprints.clear()
    assert _jit.package_fingerprint(root) != first
