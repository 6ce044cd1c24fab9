"""Paper reproductions: ``dpledger experiment NAME [--quick]`` (docs/design.md#interfaces-and-json).

Each experiment module defines ``NAME``, ``TITLE``, ``configs(quick) -> list[RunConfig]`` and
``summarize(reports, out, quick) -> Summary`` (plots, table rows, claims with numbers).  The
shared runner (:func:`run_experiment`) runs the sweep (resumable, local pool or Dask), then
writes ``experiment.json`` (full configuration, seeds, ``quick``), ``table.csv``, ``table.md``,
``claims.md`` and the plots, and prints where they are.

``--quick``: every policy, parameter class and plot of the full experiment at T ≤ 2·10⁴ and
R ≤ 3, grids thinned to their ends and middle; the same files with ``quick: true``.
"""
from __future__ import annotations

import importlib

EXPERIMENTS = {
    "hu-hegde-2022": "hu_hegde_2022",
    "azize-basu-2022": "azize_basu_2022",
    "ou-2024": "ou_2024",
    "hu-2025": "hu_2025",
    "mishra-thakurta-2015": "mishra_thakurta_2015",
    "azize-2025": "azize_2025",
    # the papers' comparisons the reproductions above left out (issue 23 §3)
    "hu-hegde-2022-nonprivate": "hu_hegde_2022_nonprivate",
    "hu-2025-horizons": "hu_2025_horizons",
    "hu-2025-equal-regret": "hu_2025_equal_regret",
    "hu-2025-equal-privacy": "hu_2025_equal_privacy",
    "ou-2024-matched": "ou_2024_matched",
    "mishra-thakurta-2015-tuned": "mishra_thakurta_2015_tuned",
    "ou-2024-prepull": "ou_2024_prepull",
    "ou-2024-privacy": "ou_2024_privacy",
    # issue 22 §7: the paper's contextual experiment
    "mishra-thakurta-2015-contextual": "mishra_thakurta_2015_contextual",
    # issue 32 §4: every private contextual policy at one certified (ε, δ)
    "private-contextual": "private_contextual",
    # issue 34 §5: Azize & Basu 2022's Theorem 5 against linear policies
    "azize-basu-2022-linear": "azize_basu_2022_linear",
}


def experiment_module(name: str):
    from dpledger.errors import DpledgerError
    mod = EXPERIMENTS.get(name)
    if mod is None:
        raise DpledgerError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return importlib.import_module(f"dpledger.experiments.{mod}")
