"""The papers' privacy theorems, one function each (algorithms.md Parts A and B).

Each returns a :class:`Theorem` with the paper, theorem number, statement, provenance label
(A16) and its value in the currencies the paper speaks.  These are the only places the theorem
formulas live; ``verify`` recomputes them from (policy, parameters, T, K).
"""
from __future__ import annotations

import math

from dpledger.accounting.certificate import Theorem


def non_private(policy: str) -> Theorem:
    return Theorem(paper="(non-private baseline)", theorem="—",
                   statement=f"{policy} reads rewards without noise: no finite guarantee",
                   provenance="baseline", unbounded=True)


def hu_hegde_2022_dp_ts(epsilon: float) -> Theorem:
    return Theorem(paper="Hu & Hegde 2022 (UAI), DP-TS", theorem="Theorem 1",
                   statement="DP-TS is ε-DP: modified logarithmic mechanism and 2^{r+1}-bounded "
                             "binary mechanism, each with budget ε/2 (basic composition)",
                   provenance="faithful", pure_epsilon=epsilon)


def hu_hegde_2022_lazy_dp_ts(epsilon: float) -> Theorem:
    return Theorem(paper="Hu & Hegde 2022 (UAI), Lazy-DP-TS", theorem="Theorem 3",
                   statement="Lazy-DP-TS is ε-DP: each reward lies in one released epoch mean "
                             "(parallel composition); sampling is post-processing",
                   provenance="faithful", pure_epsilon=epsilon)


def azize_basu_2022_adap(epsilon: float, variant: str) -> Theorem:
    return Theorem(paper=f"Azize & Basu 2022 (NeurIPS), {variant}", theorem="Theorem 6",
                   statement="AdaP-UCB/AdaP-KLUCB are ε-global DP: Laplace noise on each "
                             "episode mean, episodes do not overlap",
                   provenance="faithful", pure_epsilon=epsilon)


def sajed_sheffet_2019_dp_se(epsilon: float) -> Theorem:
    return Theorem(paper="Sajed & Sheffet 2019 (ICML), DP-SE", theorem="Theorem 3.2",
                   statement="DP-SE is ε-DP: each reward enters one epoch mean released once "
                             "with Laplace noise",
                   provenance="faithful to public implementations", pure_epsilon=epsilon,
                   notes=("constants from two independent public implementations (B §5.1)",))


def hu_huang_mehta_2021_anytime_lazy_ucb(epsilon: float) -> Theorem:
    return Theorem(paper="Hu, Huang, Mehta 2021 (arXiv 2102.07929), Anytime-Lazy-UCB",
                   theorem="privacy theorem (ε-DP)",
                   statement="ε-DP by the Lazy-DP-TS argument: one Lap(1/ε) per epoch sum of "
                             "fresh rewards",
                   provenance="reconstructed", pure_epsilon=epsilon,
                   notes=("index constants reconstructed (algorithms.md A9)",))
