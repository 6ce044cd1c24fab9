"""``njit`` for dpledger's kernels: numba's, with an on-disk cache that notices every change to
the package's compiled code, not only to the kernel's own file.

numba keys a cached kernel on its own source file's stamp.  A kernel that calls (or inlines,
``inline="always"``) a compiled function of another module keeps its cached machine code when
only that other module changes, so a source checkout could run stale code after an edit or a
merge — once here it made a contextual audit report a mismatch that the source no longer had.
This module gives every kernel whose file lies in the package (or in a folder passed to
:func:`register_root`) a stamp of its own file *and* a hash of the text of every module of the
package that defines compiled code: change any of them and every cached kernel of the package
is compiled afresh, once.  Kernels outside the package (tests, benchmarks, user code) keep
numba's behaviour.

The stamp goes through numba's cache locators (``numba.core.caching.CacheImpl``'s list, an
internal of numba checked at install): where that internal is missing, the kernels are cached
exactly as before and :data:`INSTALLED` says so.
"""
from __future__ import annotations

import hashlib
import os
import threading

import numba

__all__ = ["njit", "register_root", "package_fingerprint", "INSTALLED"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_SUBPACKAGES = ("accounting", "mechanisms", "policies", "audits")
_lock = threading.Lock()
_roots: list[str] = []
_fingerprints: dict[str, str] = {}
INSTALLED = False


def _package_roots() -> list[str]:
    """The package's folders: installed, this one; in a source checkout, also the top-level
    subpackage folders beside it (dpledger/__init__.py extends the path the same way)."""
    roots = [_HERE]
    parent = os.path.dirname(_HERE)
    if not os.path.isdir(os.path.join(_HERE, "accounting")):
        roots += [os.path.join(parent, s) for s in _SUBPACKAGES
                  if os.path.isfile(os.path.join(parent, s, "__init__.py"))]
    return roots


def register_root(path: str | os.PathLike) -> None:
    """Treat kernels under ``path`` as the package's: their stamp covers every compiled
    module under ``path``."""
    with _lock:
        _roots.append(os.path.abspath(path))
        _fingerprints.clear()


def _root_of(py_file: str) -> str | None:
    f = os.path.abspath(py_file)
    for root in _roots:
        if f == root or f.startswith(root + os.sep):
            return root
    return None


def package_fingerprint(root: str) -> str:
    """sha256 over (relative path, text) of every module under ``root`` that defines compiled
    code (its text mentions ``njit``), in path order; computed once per process and root."""
    with _lock:
        if root in _fingerprints:
            return _fingerprints[root]
        h = hashlib.sha256()
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                try:
                    with open(path, "rb") as fh:
                        text = fh.read()
                except OSError:
                    continue
                if b"njit" in text:
                    h.update(os.path.relpath(path, root).encode() + b"\0")
                    h.update(hashlib.sha256(text).digest())
        _fingerprints[root] = h.hexdigest()
        return _fingerprints[root]


def _install() -> bool:
    try:
        from numba.core import caching
        impl, base = caching.CacheImpl, caching._SourceFileBackedLocatorMixin
        originals = list(impl._locator_classes)
    except (ImportError, AttributeError):
        return False

    def stamped(cls):
        if not issubclass(cls, base):        # IPython cells, zip files: numba's own way
            return None

        class PackageStamped(cls):
            @classmethod
            def from_function(klass, py_func, py_file):
                if _root_of(py_file) is None:
                    return None
                return super().from_function(py_func, py_file)

            def get_source_stamp(self):
                root = _root_of(self._py_file)
                return (super().get_source_stamp(), package_fingerprint(root))

        PackageStamped.__name__ = f"PackageStamped{cls.__name__}"
        return PackageStamped

    ours = [c for c in map(stamped, originals) if c is not None]
    impl._locator_classes = ours + originals
    return True


_roots.extend(_package_roots())
INSTALLED = _install()


def njit(*args, **kwargs):
    """``numba.njit``; kernels cached under the package's stamp (module docstring)."""
    return numba.njit(*args, **kwargs)
