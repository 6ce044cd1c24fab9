"""dpledger: per-reward differential-privacy accounting for private bandit policies.

Subpackages: ``dpledger.accounting`` (release vocabulary, ledger, accountants, certificates),
``dpledger.mechanisms`` (noise samplers and continual counters), ``dpledger.policies`` (bandit
policies and the simulator), ``dpledger.audits`` (neighbouring-stream lower bounds).

Installed, the subpackages live inside this package.  In a source checkout they are the
top-level folders next to this one (``accounting/`` …); the path extension below makes the
checkout import exactly like the installed package, under the one ``dpledger.`` namespace, so
that the unrelated PyPI packages ``accounting``, ``policies`` and ``audits`` are never shadowed
or picked up.
"""
from __future__ import annotations

import os as _os

__version__ = "0.1.0"

_here = _os.path.dirname(_os.path.abspath(__file__))
_root = _os.path.dirname(_here)
if (not _os.path.isdir(_os.path.join(_here, "accounting"))
        and _os.path.isfile(_os.path.join(_root, "pyproject.toml"))
        and _os.path.isfile(_os.path.join(_root, "accounting", "__init__.py"))):
    __path__.append(_root)  # type: ignore[name-defined]  # source checkout
