"""The installed package is what gets imported, under the one ``dpledger.`` namespace."""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

import dpledger

REPO = pathlib.Path(__file__).resolve().parents[1]
SUBPACKAGES = {"accounting": "accounting", "mechanisms": "mechanisms", "policies": "policies",
               "audits": "audits", "commands": "dpledger/commands"}


def _installed_files() -> dict:
    code = ("import json, dpledger, importlib;"
            "mods = {n: importlib.import_module('dpledger.' + n).__file__ for n in %r};"
            "mods['dpledger'] = dpledger.__file__; print(json.dumps(mods))" % sorted(SUBPACKAGES))
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_installed_package_matches_source_tree():
    """Outside the checkout, `import dpledger.X` must give this checkout's code (an editable
    install) or an identical copy (`pip install .`); a stale or foreign package fails here."""
    files = _installed_files()
    for name, src in SUBPACKAGES.items():
        installed = pathlib.Path(files[name]).parent
        for py in sorted((REPO / src).glob("*.py")):
            twin = installed / py.name
            assert twin.exists(), f"dpledger.{name} lacks {py.name}: reinstall with pip install ."
            assert twin.read_bytes() == py.read_bytes(), (
                f"installed dpledger.{name}/{py.name} differs from the source tree; reinstall")


def test_source_tree_imports_like_installed():
    import dpledger.accounting
    assert pathlib.Path(dpledger.accounting.__file__).read_bytes() == \
        (REPO / "accounting" / "__init__.py").read_bytes()
    assert dpledger.__version__


def test_internal_imports_use_the_namespace():
    bare = re.compile(r"^\s*(from|import)\s+(accounting|mechanisms|policies|audits)(\.|\s|$)", re.M)
    offenders = []
    for folder in ("dpledger", "accounting", "mechanisms", "policies", "audits", "tests",
                   "benchmarks"):
        for py in (REPO / folder).rglob("*.py"):
            if bare.search(py.read_text()):
                offenders.append(str(py.relative_to(REPO)))
    assert offenders == []


def test_console_script():
    exe = pathlib.Path(sys.executable).parent / "dpledger"
    if not exe.exists():
        pytest.fail("console script 'dpledger' is not installed next to the interpreter")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == dpledger.__version__


def test_version_when_dpledger_imports_as_a_namespace_package():
    """A leftover ``site-packages/dpledger`` folder (numba cache files of an earlier
    non-editable install) makes an editable install import ``dpledger`` as a namespace package
    whose ``__init__`` never runs: ``--version`` (built into every parser) then read the
    distribution's version instead of failing with an ImportError traceback."""
    import subprocess
    import sys
    from importlib.metadata import version
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys, types; m = types.ModuleType('dpledger'); "
            f"m.__path__ = [{os.path.join(here, 'dpledger')!r}, {here!r}]; "
            "sys.modules['dpledger'] = m; from dpledger.cli import main; "
            "sys.exit(main(['--version']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert out.stdout.split()[-1] == version("dpledger")
